import Glibc
import Synchronization
import Testing

@testable import ChangeServer

/// The file journal's failures are logged at most once a second, and so is their end: a disk that failed every
/// other write logged a failure and a recovery for each.
@Suite struct InProcessWriteFailuresTests {
    @Test func failuresAndRecoveriesAreLoggedAtMostOnceASecond() {
        let lines = Mutex<[String]>([])
        let failures = WriteFailures("journal write") { level, line in lines.withLock { $0.append("\(level) \(line)") }
        }
        let started = MonotonicClock.now()
        for _ in 0..<200 {
            failures.failed("No space left on device", mutations: 2)
            #expect(failures.isFailing)
            failures.succeeded()
            #expect(!failures.isFailing)
        }
        let seconds = Int((MonotonicClock.now() - started) / 1000)
        let logged = lines.withLock { $0 }
        let failureLines = logged.filter { $0.hasPrefix("error journal write failed: No space left on device") }
        let recoveryLines = logged.filter { $0.hasPrefix("notice journal write succeeds again, after ") }
        #expect(failureLines.count >= 1 && failureLines.count <= seconds + 1, "\(logged)")
        #expect(recoveryLines.count >= 1 && recoveryLines.count <= seconds + 1, "\(logged)")
        #expect(logged.count == failureLines.count + recoveryLines.count)
        #expect(logged.first == "error journal write failed: No space left on device; 2 mutations answered 503")
        #expect(
            logged.dropFirst().first
                == "notice journal write succeeds again, after 1 failures that answered 2 mutations 503")
    }

    /// A recovery held back (within a second of the last one) is logged all the same when a failure was logged
    /// since: else the log could end on that failure while the journal is well.
    @Test func aRecoveryAfterALoggedFailureIsLogged() throws {
        let lines = Mutex<[String]>([])
        let failures = WriteFailures("journal write") { _, line in lines.withLock { $0.append(line) } }
        failures.failed("No space left on device", mutations: 1)
        failures.succeeded()
        // Past the failures' second, within the recoveries' (measured: the loop may be slow).
        let started = MonotonicClock.now()
        while MonotonicClock.now() - started < 1050 { usleep(10_000) }
        failures.failed("No space left on device", mutations: 1)
        failures.succeeded()
        let logged = lines.withLock { $0 }
        #expect(logged.count == 4, "\(logged)")
        #expect(logged.last?.hasPrefix("journal write succeeds again, after 1 failures") == true, "\(logged)")
    }

    /// The failures a recovery line counted are not counted again by the next burst's first line: each burst's
    /// lines had added the one before's.
    @Test func aBurstIsCountedOnce() {
        let lines = Mutex<[String]>([])
        let failures = WriteFailures("journal write") { _, line in lines.withLock { $0.append(line) } }
        for _ in 0..<33 { failures.failed("No space left on device", mutations: 1) }
        failures.succeeded()
        let started = MonotonicClock.now()
        while MonotonicClock.now() - started < 1050 { usleep(10_000) }
        for _ in 0..<5 { failures.failed("No space left on device", mutations: 1) }
        failures.succeeded()
        #expect(
            lines.withLock { $0 } == [
                "journal write failed: No space left on device; 1 mutations answered 503",
                "journal write succeeds again, after 33 failures that answered 33 mutations 503",
                "journal write failed: No space left on device; 1 mutations answered 503",
                "journal write succeeds again, after 5 failures that answered 5 mutations 503",
            ])
    }

    @Test func aRecoveryCountsTheFailuresSinceTheLastOne() {
        let lines = Mutex<[String]>([])
        let failures = WriteFailures("journal fsync") { _, line in lines.withLock { $0.append(line) } }
        for _ in 0..<5 { failures.failed("Input/output error", mutations: 0) }
        #expect(lines.withLock { $0 } == ["journal fsync failed: Input/output error; 0 mutations answered 503"])
        failures.succeeded()
        #expect(
            lines.withLock { $0.last } == "journal fsync succeeds again, after 5 failures that answered 0 mutations 503"
        )
    }
}
