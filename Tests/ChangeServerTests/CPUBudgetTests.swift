import Foundation
import ProcessSupport
import Testing

@testable import ChangeServer

/// The default number of event loops follows the CPUs the process may use.
@Suite struct CPUBudgetTests {
    @Test func loopsFollowTheSmallerOfAffinityAndQuota() {
        #expect(CPUBudget(affinity: 4, quota: nil).loops == 4)
        #expect(CPUBudget(affinity: 4, quota: 1).loops == 1)
        #expect(CPUBudget(affinity: 4, quota: 1.5).loops == 2)
        #expect(CPUBudget(affinity: 2, quota: 8).loops == 2)
        #expect(CPUBudget(affinity: 4, quota: 0.2).loops == 1)
        #expect(CPUBudget(affinity: 2, quota: nil).description == "affinity 2 CPUs, quota none")
        #expect(CPUBudget(affinity: 1, quota: 1.5).description == "affinity 1 CPU, quota 1.5 CPUs")
    }

    @Test func parsesQuotasAndCPULists() {
        #expect(CPUBudget.countCPUs("0-3,8,10-11\n") == 7)
        #expect(CPUBudget.countCPUs("0") == 1)
        #expect(CPUBudget.countCPUs("x") == nil)
        #expect(CPUBudget.parseCPUMax("max 100000\n") == nil)
        #expect(CPUBudget.parseCPUMax("150000 100000\n") == 1.5)
        #expect(CPUBudget.parseCFS(quota: "-1\n", period: "100000\n") == nil)
        #expect(CPUBudget.parseCFS(quota: "50000\n", period: "100000\n") == 0.5)
    }

    /// The smallest quota from the process's cgroup up to the root, in a v2 and in a v1 hierarchy.
    @Test func readsTheCgroupTree() throws {
        let tree = CgroupFixture()
        defer { tree.remove() }
        let root = tree.root
        let write = tree.write
        try write("/cpu.max", "max 100000\n")
        try write("/pod/cpu.max", "150000 100000\n")
        try write("/pod/app/cpu.max", "max 100000\n")
        #expect(CPUBudget.cgroupQuota(membership: "0::/pod/app\n", root: root) == 1.5)
        try write("/cpu/job/cpu.cfs_quota_us", "100000\n")
        try write("/cpu/job/cpu.cfs_period_us", "100000\n")
        #expect(CPUBudget.cgroupQuota(membership: "4:cpu,cpuacct:/job\n", root: root) == 1)
        #expect(CPUBudget.cgroupQuota(membership: "4:memory:/job\n0::/\n", root: root) == nil)
    }
}

/// The server started under an affinity of one CPU, and in a cgroup with a quota of one CPU where this machine
/// lets the test make one, starts one event loop and says why.
@Suite(.tags(.liveServer)) struct LiveCPUBudgetTests {
    @Test func oneLoopUnderTasksetOfOneCPU() throws {
        let server = try ServerProcess([], launcher: ["/usr/bin/taskset", "-c", "0"])
        #expect(server.log.contains("with 1 event loop (affinity 1 CPU, quota "), "\(server.log)")
    }

    static let v1 = [(file: "cpu.cfs_period_us", value: "100000"), (file: "cpu.cfs_quota_us", value: "100000")]
    static let v2 = [(file: "cpu.max", value: "100000 100000")]

    @Test(.enabled(if: CgroupFixture.canMakeGroup("cpu", v1: v1, v2: v2)))
    func oneLoopUnderACgroupQuotaOfOneCPU() throws {
        let group = try #require(CgroupFixture.group("cpu", v1: Self.v1, v2: Self.v2))
        defer { rmdir(group) }
        let server = try ServerProcess([], launcher: CgroupFixture.launcher(joining: group))
        #expect(server.log.contains("with 1 event loop (affinity "), "\(server.log)")
        #expect(server.log.contains("quota 1 CPUs)"), "\(server.log)")
        #expect(server.stop() == 0)
    }
}
