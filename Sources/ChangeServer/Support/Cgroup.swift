/// The cgroup file system as this process sees it: the directories of its cgroup and their ancestors, where
/// limits set by a container runtime are read (`CPUBudget`, `MemoryLimit`).
enum Cgroup {
    /// The directories of the process's cgroup for `controller`, from its own up to the root, in a v2 hierarchy
    /// (the `0::` line of `membership`) and in a v1 one (the line naming the controller, mounted at one of
    /// `v1Mounts` under `root`). `membership` is `/proc/self/cgroup`; `root` is where the cgroup file system is
    /// mounted.
    static func directories(
        membership: String, controller: String, v1Mounts: [String], root: String = "/sys/fs/cgroup"
    ) -> (v2: [String], v1: [String]) {
        var v2: [String] = []
        var v1: [String] = []
        for line in membership.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            let path = String(fields[2])
            if fields[1].isEmpty {
                v2 += ancestors(root + path, stoppingAt: root)
            } else if fields[1].split(separator: ",").contains(Substring(controller)) {
                for mount in v1Mounts.map({ root + "/" + $0 }) {
                    v1 += ancestors(mount + path, stoppingAt: mount)
                }
            }
        }
        return (v2, v1)
    }

    /// The text of a file of the cgroup file system or of `/proc` (`readProcFile`), nil when it cannot be read.
    static func contents(_ path: String) -> String? {
        readProcFile(path, limit: 4096)
    }

    private static func ancestors(_ path: String, stoppingAt root: String) -> [String] {
        var result: [String] = []
        var current = path.hasSuffix("/") && path.count > 1 ? String(path.dropLast()) : path
        while current.count >= root.count {
            result.append(current)
            guard let slash = current.lastIndex(of: "/"), current != root else { break }
            current = String(current[..<slash])
        }
        return result
    }
}
