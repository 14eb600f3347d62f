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

    /// A new group under the cgroup v1 controller mounted at `mount` (`/sys/fs/cgroup/cpu`), with `settings`
    /// written to its files; nil when this machine lets no group be made there. Remove it with `rmdir`.
    static func v1Group(under mount: String, settings: [(file: String, value: String)]) throws -> String? {
        let group = mount + "/changeserver-test-\(getpid())"
        guard mkdir(group, 0o755) == 0 else { return nil }
        for setting in settings {
            try setting.value.write(toFile: group + "/" + setting.file, atomically: false, encoding: .utf8)
        }
        return group
    }

    /// A `ServerProcess` launcher that starts the server inside `group`.
    static func launcher(joining group: String) -> [String] {
        ["/bin/sh", "-c", "echo $$ > \(group)/cgroup.procs && exec \"$@\"", "sh"]
    }
}
