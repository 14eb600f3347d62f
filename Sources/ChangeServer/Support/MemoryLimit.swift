import Foundation

/// The memory this process may use: the smallest limit of its cgroup and their ancestors (a container's limit:
/// `docker run --memory`, a Kubernetes limit; cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`), nil when there
/// is none. The defaults of the memory budgets follow it (`Config.fitted(toMemory:)`): sized for a machine, they
/// let one client's uploads get a container of a few hundred MB killed.
enum MemoryLimit {
    /// This process's limit, read from the cgroup file system.
    static func current() -> Int? {
        cgroupLimit(membership: Cgroup.contents("/proc/self/cgroup") ?? "")
    }

    static func cgroupLimit(membership: String, root: String = "/sys/fs/cgroup") -> Int? {
        let directories = Cgroup.directories(
            membership: membership, controller: "memory", v1Mounts: ["memory"], root: root)
        let limits =
            directories.v2.compactMap { Cgroup.contents($0 + "/memory.max").flatMap(parse) }
            + directories.v1.compactMap { Cgroup.contents($0 + "/memory.limit_in_bytes").flatMap(parse) }
        return limits.min()
    }

    /// Bytes, or nil for none: v2 writes `max`, v1 a number near 2^63 (a page-rounded `Int64.max`).
    static func parse(_ text: String) -> Int? {
        guard let bytes = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), bytes > 0, bytes < 1 << 60
        else { return nil }
        return bytes
    }
}
