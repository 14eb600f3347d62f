import Foundation
import Glibc

/// Cgroups for the tests of the limits read from them (`CPUBudget`, `MemoryLimit`): a tree laid out in a temporary
/// directory, and a real group a server can be started in where this machine lets a test make one.
struct CgroupFixture {
    /// A temporary directory standing for the cgroup file system's mount.
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("cgroup-\(UUID().uuidString)").path

    /// Writes `text` to `path` under `root`, making its directories.
    func write(_ path: String, _ text: String) throws {
        let file = root + path
        try FileManager.default.createDirectory(
            atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: file, atomically: true, encoding: .utf8)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// A new group for `controller` with `settings` written to its files: under the controller's cgroup v1 mount
    /// (`/sys/fs/cgroup/cpu`) with `v1`, else at the root of a cgroup v2 hierarchy that offers the controller with
    /// `v2`; nil when this machine lets no such group be made. Remove it with `rmdir`.
    static func group(
        _ controller: String, v1: [(file: String, value: String)], v2: [(file: String, value: String)]
    ) -> String? {
        let name = "changeserver-test-\(getpid())-\(controller)"
        // A v2 group has the controller's files only when its parent hands the controller down to its children.
        let handedDown = (try? String(contentsOfFile: "/sys/fs/cgroup/cgroup.subtree_control", encoding: .utf8)) ?? ""
        let choices = [
            ("/sys/fs/cgroup/\(controller)/\(name)", v1),
            handedDown.split(whereSeparator: \.isWhitespace).contains(Substring(controller))
                ? ("/sys/fs/cgroup/\(name)", v2) : nil,
        ]
        for case (let group, let settings)? in choices where mkdir(group, 0o755) == 0 {
            let written = settings.allSatisfy { setting in
                (try? setting.value.write(toFile: group + "/" + setting.file, atomically: false, encoding: .utf8))
                    != nil
            }
            if written { return group }
            rmdir(group)
        }
        return nil
    }

    /// Whether `group` can make that group here, its settings written: for `.enabled(if:)`, so that a machine
    /// without one shows the test skipped rather than passed.
    static func canMakeGroup(
        _ controller: String, v1: [(file: String, value: String)], v2: [(file: String, value: String)]
    ) -> Bool {
        guard let group = group(controller, v1: v1, v2: v2) else { return false }
        rmdir(group)
        return true
    }

    /// A `ServerProcess` launcher that starts the server inside `group`.
    static func launcher(joining group: String) -> [String] {
        ["/bin/sh", "-c", "echo $$ > \(group)/cgroup.procs && exec \"$@\"", "sh"]
    }
}
