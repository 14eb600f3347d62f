import Testing

@testable import ChangeServer

/// What the log says of a PostgreSQL store whose commits fail and succeed: at most a line a minute, and never a last
/// line that the store has left.
@Suite struct InProcessCommitStateLogTests {
    let full = StorageError.unavailable(reason: "No space left on device")
    let frozen = StorageError.unavailable(reason: "canceling statement due to statement timeout")

    @Test func aFailureIsSaidOncePerReasonOrMinute() {
        var log = CommitStateLog()
        #expect(log.line(failing: true, error: full, now: 0) == .failing(reason: "\(full)", changes: 0))
        #expect(log.line(failing: true, error: full, now: 10_000) == nil)
        #expect(log.line(failing: true, error: frozen, now: 20_000) == .failing(reason: "\(frozen)", changes: 0))
        #expect(log.line(failing: true, error: frozen, now: 50_000) == nil)
        #expect(log.line(failing: true, error: frozen, now: 80_000) == .failing(reason: "\(frozen)", changes: 0))
        #expect(log.line(failing: false, error: nil, now: 200_000) == .takenAgain(changes: 0))
        #expect(!log.owes(failing: false))
    }

    /// An outage whose reason changed on the way (the file a full disk names, a timeout after it) says its end at
    /// once: the lines of its reasons took the minute's two lines, and "takes writes again" came 45 s late.
    @Test func anOutageWhoseReasonChangesSaysItsEndAtOnce() {
        var log = CommitStateLog()
        let other = StorageError.unavailable(reason: "could not extend file \"base/16384/16390\"")
        #expect(log.line(failing: true, error: full, now: 0) == .failing(reason: "\(full)", changes: 0))
        #expect(log.line(failing: true, error: other, now: 10_000) == .failing(reason: "\(other)", changes: 0))
        // Reasons that change by turns are said at most every 10 s.
        #expect(log.line(failing: true, error: full, now: 12_000) == nil)
        #expect(log.line(failing: true, error: frozen, now: 20_000) == .failing(reason: "\(frozen)", changes: 0))
        #expect(log.line(failing: false, error: nil, now: 25_000) == .takenAgain(changes: 0))
        #expect(!log.owes(failing: false))
    }

    /// An outage gets its two lines at once; a store that flips more often says so once its minute is out, with how
    /// often it flipped, and the log never ends on a state the store has left (a review found both orders: "takes
    /// writes again" last while it failed, and a failure last while it took them).
    @Test func flipsWithinAMinuteAreSaidOnceItIsOut() {
        var log = CommitStateLog()
        #expect(log.line(failing: true, error: full, now: 0) == .failing(reason: "\(full)", changes: 0))
        #expect(log.line(failing: false, error: nil, now: 7_000) == .takenAgain(changes: 0))
        #expect(log.line(failing: true, error: full, now: 12_000) == nil)
        #expect(log.owes(failing: true))
        #expect(log.line(failing: false, error: nil, now: 17_000) == nil)
        #expect(!log.owes(failing: false))
        #expect(log.line(failing: true, error: full, now: 22_000) == nil)
        // The idle writer looks every 5 s while a line is owed; the minute from the first of the last two lines.
        #expect(log.line(failing: true, error: nil, now: 57_000) == nil)
        #expect(log.line(failing: true, error: full, now: 62_000) == .failing(reason: "\(full)", changes: 2))
        // Lines at 7 s and 62 s: one in the minute before 80 s.
        #expect(log.line(failing: false, error: nil, now: 80_000) == .takenAgain(changes: 0))
        #expect(log.line(failing: true, error: frozen, now: 85_000) == nil)
        #expect(log.owes(failing: true))
        #expect(log.line(failing: true, error: nil, now: 120_000) == nil)
        #expect(log.line(failing: true, error: nil, now: 125_000) == .failing(reason: "\(frozen)", changes: 0))
        #expect(!log.owes(failing: true))
    }
}
