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
        CPUBudget(affinity: affinityCount(), quota: cgroupQuota(membership: Cgroup.contents("/proc/self/cgroup") ?? ""))
    }

    /// The CPUs of the affinity mask, from `Cpus_allowed_list` in `/proc/self/status` (glibc's
    /// `sched_getaffinity` is not visible to Swift without `_GNU_SOURCE`).
    private static func affinityCount() -> Int {
        let status = Cgroup.contents("/proc/self/status") ?? ""
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
        let directories = Cgroup.directories(
            membership: membership, controller: "cpu", v1Mounts: ["cpu,cpuacct", "cpu"], root: root)
        let v2 = directories.v2.compactMap { Cgroup.contents($0 + "/cpu.max").flatMap(parseCPUMax) }
        let v1 = directories.v1.compactMap { directory in
            Cgroup.contents(directory + "/cpu.cfs_quota_us").flatMap { quota in
                Cgroup.contents(directory + "/cpu.cfs_period_us").flatMap { parseCFS(quota: quota, period: $0) }
            }
        }
        return (v2 + v1).min()
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
}
