import Synchronization

/// Lets something through at most once a minute, from any thread: a log line that clients can cause at will.
final class OncePerMinute: Sendable {
    private let last = Atomic<Int64>(Int64.min)

    /// True at most once in any 60 s (`now` in monotonic milliseconds).
    func allows(now: Int64 = MonotonicClock.now()) -> Bool {
        let previous = last.load(ordering: .relaxed)
        guard previous == Int64.min || now - previous >= 60_000 else { return false }
        return last.compareExchange(expected: previous, desired: now, ordering: .relaxed).exchanged
    }
}
