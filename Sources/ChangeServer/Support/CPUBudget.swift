import Foundation
import Glibc

/// The CPUs this process may actually use, which is what the default number of event loops follows: its affinity
/// mask (`taskset`, a container's cpuset) and its cgroup's CPU quota (`docker run --cpus`, Kubernetes limits:
/// cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), whichever is smaller, a fractional quota
/// rounded up, at least 1. Counting online CPUs instead would start 64 loops in a one-CPU container.
struct CPUBudget: Equatable, CustomStringConvertible {
    /// CPUs in the affinity mask.
    var affinity: Int
    /// The quota in CPUs (1.5 for 150 ms per 100 ms), nil when there is none.
    var quota: Double?

    /// Event loops to start.
    var loops: Int {
        let byQuota = quota.map { Int(($0 - 0.0001).rounded(.up)) } ?? affinity
        return max(1, min(affinity, byQuota))
    }

    var description: String {
        let quotaText = quota.map { "\($0.formatted(.number.precision(.fractionLength(0...2)))) CPUs" } ?? "none"
        return "affinity \(affinity) CPU\(affinity == 1 ? "" : "s"), quota \(quotaText)"
    }

    /// This process's budget, read from the kernel and the cgroup file system.
    static func current() -> CPUBudget {
        CPUBudget(affinity: affinityCount(), quota: cgroupQuota(membership: contents("/proc/self/cgroup") ?? ""))
    }

    /// The CPUs of the affinity mask, from `Cpus_allowed_list` in `/proc/self/status` (glibc's
    /// `sched_getaffinity` is not visible to Swift without `_GNU_SOURCE`).
    private static func affinityCount() -> Int {
        let status = contents("/proc/self/status") ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") }
        guard let list = line?.split(separator: ":", maxSplits: 1).last, let count = countCPUs(String(list)) else {
            return max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        }
        return max(1, count)
    }

    /// Counts a CPU list such as `0-3,8,10-11`; nil when it is not one.
    static func countCPUs(_ list: String) -> Int? {
        var count = 0
        for part in list.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",") {
            let bounds = part.split(separator: "-")
            guard let first = bounds.first.flatMap({ Int($0) }), let last = bounds.last.flatMap({ Int($0) }),
                bounds.count <= 2, last >= first
            else { return nil }
            count += last - first + 1
        }
        return count > 0 ? count : nil
    }

    /// The smallest quota on the way from the process's cgroup up to the root, for v2 and v1 hierarchies.
    /// `membership` is `/proc/self/cgroup`; `root` is where the cgroup file system is mounted.
    static func cgroupQuota(membership: String, root: String = "/sys/fs/cgroup") -> Double? {
        var quotas: [Double] = []
        for line in membership.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            let path = String(fields[2])
            if fields[1].isEmpty {
                for directory in ancestors(root + path, stoppingAt: root) {
                    if let quota = contents(directory + "/cpu.max").flatMap(parseCPUMax) { quotas.append(quota) }
                }
            } else if fields[1].split(separator: ",").contains("cpu") {
                for mount in [root + "/cpu,cpuacct", root + "/cpu"] {
                    for directory in ancestors(mount + path, stoppingAt: mount) {
                        if let quota = contents(directory + "/cpu.cfs_quota_us"),
                            let period = contents(directory + "/cpu.cfs_period_us"),
                            let value = parseCFS(quota: quota, period: period)
                        {
                            quotas.append(value)
                        }
                    }
                }
            }
        }
        return quotas.min()
    }

    /// cgroup v2 `cpu.max`: `"<quota> <period>"` in microseconds, or `"max <period>"` for no quota.
    static func parseCPUMax(_ text: String) -> Double? {
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count == 2, let quota = Double(fields[0]), let period = Double(fields[1]), quota > 0, period > 0
        else { return nil }
        return quota / period
    }

    /// cgroup v1: `cpu.cfs_quota_us` (`-1` for none) over `cpu.cfs_period_us`.
    static func parseCFS(quota: String, period: String) -> Double? {
        guard let quota = Double(quota.trimmingCharacters(in: .whitespacesAndNewlines)),
            let period = Double(period.trimmingCharacters(in: .whitespacesAndNewlines)), quota > 0, period > 0
        else { return nil }
        return quota / period
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

    private static func contents(_ path: String) -> String? {
        try? String(contentsOfFile: path, encoding: .utf8)
    }
}
