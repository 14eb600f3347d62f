import Foundation

/// Ends a test run that hangs, with a diagnosis: once armed (by the first server or program a test starts), a run
/// still going `limit` later prints the stacks of every thread of the test process (with gdb, which
/// `scripts/install-deps.sh` installs), their frames in the tests, and the processes the run started, then exits with
/// status 70 at once. The whole suite takes minutes; a run that hung instead would be stopped by CI at its 90 minutes
/// with nothing to show where.
enum RunWatchdog {
    static let limit: Double = 45 * 60

    /// Call before anything that can wait on another process.
    static func arm() { _ = armed }

    private static let armed: Void = {
        let thread = Thread {
            Thread.sleep(forTimeInterval: limit)
            let verdict = "the test run is still going after \(Int(limit / 60)) minutes: it hangs"
            report(verdict + "; the stacks of its threads:")
            let folder = URL(fileURLWithPath: NSTemporaryDirectory())
            let stacks =
                (try? ProgramRun.run(
                    ["gdb", "-p", "\(getpid())", "-batch", "-ex", "thread apply all bt 30"], in: folder, timeout: 120))?
                .output ?? "gdb could not be run"
            report(stacks)
            let testFrames = stacks.split(separator: "\n").filter { $0.contains("/Tests/") }
            report("Their frames in the tests:\n" + testFrames.joined(separator: "\n"))
            let processes = ProcessTable.descendants(of: getpid()).map(\.command)
            report("The processes it started, still running:\n" + processes.joined(separator: "\n"))
            report(verdict + ": stopped (see above)")
            // Not `exit`: its handlers could wait on a lock a stuck thread holds; the reports went out unbuffered.
            _exit(70)
        }
        thread.name = "run watchdog"
        thread.start()
    }()

    private static func report(_ text: String) {
        FileHandle.standardError.write(Data(("\n" + text + "\n").utf8))
    }
}
