import Foundation
import ProcessSupport
import Testing

/// The helper that runs node, Python and scripts for other tests ends whatever they start, within bounded time.
@Suite struct ProgramRunTests {
    static let here = URL(fileURLWithPath: NSTemporaryDirectory())

    @Test func anExitStatusAndBothOutputsAreKept() throws {
        let run = try ProgramRun.run(["bash", "-c", "echo out; echo err >&2; exit 3"], in: Self.here, timeout: 30)
        #expect(run.status == 3)
        #expect(run.output.contains("out\n") && run.output.contains("err\n"), "\(run.output)")
        #expect(run.leftRunning.isEmpty)
    }

    /// The case that can hang a run for ever: the program exits, and a process it started holds Foundation's socket
    /// on.
    @Test func aProcessLeftRunningIsNamedAndKilled() throws {
        try Self.expectLeftProcessFoundAtOnceAndKilled("sleep 300 & echo $!; exit 0")
    }

    /// A process left running that closed every inherited descriptor (as Python's subprocesses do) does not hold
    /// the program's end back, and is found by its process group.
    @Test func aProcessLeftRunningWithItsDescriptorsClosedIsKilled() throws {
        let detach =
            #"(for fd in $(ls /proc/$BASHPID/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done; exec sleep 301) & echo $!; exit 0"#
        try Self.expectLeftProcessFoundAtOnceAndKilled(detach)
    }

    @Test func aProgramPastItsTimeIsKilledWithWhatItStarted() throws {
        let run = try ProgramRun.run(["bash", "-c", "sleep 302 & echo $!; wait"], in: Self.here, timeout: 1)
        #expect(run.status == nil)
        #expect(run.output.hasPrefix("timed out after 1.0 s\nkilled by signal 9\n"), "\(run.output)")
        Self.expectGone(try Self.printedPID(run.output))
    }

    /// Runs `script`, which starts one process, prints its PID and exits 0: the run ends long before its time out,
    /// names that process as left running, and kills it.
    static func expectLeftProcessFoundAtOnceAndKilled(_ script: String) throws {
        let started = ContinuousClock.now
        let run = try ProgramRun.run(["bash", "-c", script], in: here, timeout: 60)
        #expect(ContinuousClock.now - started < .seconds(30), "waited for the time out")
        #expect(run.status == 0)
        let pid = try printedPID(run.output)
        // The process may not have reached its `exec` yet when the run ends, and then a child of it is found too
        // (its `ls` of its descriptors, seen in a busy CI run): the process must be among those named.
        #expect(run.leftRunning.contains { $0.hasPrefix("\(pid): ") }, "\(run.leftRunning)")
        expectGone(pid)
    }

    /// The PID the program printed on its last line.
    static func printedPID(_ output: String) throws -> pid_t {
        try #require(output.split(separator: "\n").last.flatMap { pid_t($0) }, "\(output)")
    }

    /// `pid` is gone (or a zombie, waiting for its new parent).
    static func expectGone(_ pid: pid_t) {
        #expect(waitUntil(timeout: 10) { kill(pid, 0) != 0 || ProcessTable.isZombie(pid) }, "\(pid) still runs")
    }
}
