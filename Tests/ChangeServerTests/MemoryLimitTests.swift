import Foundation
import ProcessSupport
import Testing

@testable import ChangeServer

/// The memory budgets' defaults follow a container's memory limit.
@Suite struct MemoryLimitTests {
    @Test func parsesLimits() {
        #expect(MemoryLimit.parse("419430400\n") == 419_430_400)
        #expect(MemoryLimit.parse("max\n") == nil)
        #expect(MemoryLimit.parse("9223372036854771712\n") == nil)
        #expect(MemoryLimit.parse("0") == nil)
    }

    /// The smallest limit from the process's cgroup up to the root, in a v2 and in a v1 hierarchy.
    @Test func readsTheCgroupTree() throws {
        let tree = CgroupFixture()
        defer { tree.remove() }
        let root = tree.root
        let write = tree.write
        try write("/memory.max", "max\n")
        try write("/pod/memory.max", "536870912\n")
        try write("/pod/app/memory.max", "max\n")
        #expect(MemoryLimit.cgroupLimit(membership: "0::/pod/app\n", root: root) == 536_870_912)
        try write("/memory/memory.limit_in_bytes", "9223372036854771712\n")
        try write("/memory/job/memory.limit_in_bytes", "419430400\n")
        #expect(MemoryLimit.cgroupLimit(membership: "4:memory:/job\n", root: root) == 419_430_400)
        #expect(MemoryLimit.cgroupLimit(membership: "1:cpu:/job\n0::/\n", root: root) == nil)
    }

    /// Bodies get at most a sixteenth of the limit (at least `--max-body-bytes`), large answers an eighth; budgets
    /// given are kept, and no limit changes nothing.
    @Test func budgetsFitTheLimit() throws {
        let defaults = try #require(try Config.parse(arguments: [], environment: [:]).config)
        #expect(defaults.fitted(toMemory: nil).config.maxBodyMemory == 256 << 20)
        #expect(defaults.fitted(toMemory: nil).note == nil)
        let small = defaults.fitted(toMemory: 400 << 20)
        #expect(small.config.maxBodyMemory == 25 << 20)
        #expect(small.config.maxResponseMemory == 50 << 20)
        #expect(small.note?.contains("--max-body-memory 26214400 and --max-response-memory 52428800") == true)
        let tiny = defaults.fitted(toMemory: 128 << 20).config
        #expect(tiny.maxBodyMemory == defaults.maxBodyBytes)
        let large = defaults.fitted(toMemory: 64 << 30)
        #expect(large.config.maxBodyMemory == 256 << 20 && large.config.maxResponseMemory == 1 << 30)
        #expect(large.note == nil)
        let given = try #require(
            try Config.parse(
                arguments: ["--max-body-memory", "300000000"], environment: ["CHANGESERVER_MAX_RESPONSE_MEMORY": "7"]
            ).config)
        let kept = given.fitted(toMemory: 400 << 20)
        #expect(kept.config.maxBodyMemory == 300_000_000 && kept.config.maxResponseMemory == 7)
        #expect(kept.note == nil)
        let bodiesGiven = try #require(
            try Config.parse(arguments: ["--max-body-memory", "20000000"], environment: [:]).config)
        let half = bodiesGiven.fitted(toMemory: 400 << 20)
        #expect(half.note?.contains("--max-response-memory 52428800 by default") == true, "\(half.note ?? "")")
        #expect(half.note?.contains("--max-body-memory") == false)
    }
}

/// The server started in a cgroup with a memory limit, where this machine lets the test make one, fits its budgets
/// to it and says so.
@Suite(.tags(.liveServer)) struct LiveMemoryLimitTests {
    static let v1 = [(file: "memory.limit_in_bytes", value: "\(400 << 20)")]
    static let v2 = [(file: "memory.max", value: "\(400 << 20)")]

    @Test(.enabled(if: CgroupFixture.canMakeGroup("memory", v1: v1, v2: v2)))
    func budgetsFitACgroupMemoryLimit() throws {
        let group = try #require(CgroupFixture.group("memory", v1: Self.v1, v2: Self.v2))
        defer { rmdir(group) }
        let server = try ServerProcess([], launcher: CgroupFixture.launcher(joining: group))
        #expect(
            server.log.contains(
                "the memory limit is 419430400 bytes (cgroup): --max-body-memory 26214400 and --max-response-memory "
                    + "52428800"), "\(server.log)")
        #expect(try server.client.put("/v1/collections/c", ["sections": [] as [Any]]).status == 201)
        #expect(server.stop() == 0)
    }
}
