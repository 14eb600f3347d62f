import Synchronization

/// How many held polls and open streams follow one collection or view, on every loop together. A commit that
/// nobody follows is not posted to the loops at all: each post wakes a loop, and with no follower those wake-ups
/// were two thirds of the eventfd writes of a write (one per loop, besides the one that answers it).
///
/// A follower is counted before its loop reads the subject's version a last time (`Feed.hold`, `StreamHub.open`);
/// a commit writes the version before it reads the count (`FeedFanOut.publish`). Both versions are read and written
/// under the subject's lock, so either the commit sees the follower counted and posts, or the follower's read comes
/// after the commit's write and sees the new version: the count can be relaxed, the lock orders it.
final class Followers: Sendable {
    private let count = Atomic<Int>(0)

    init() {}

    func join() {
        count.add(1, ordering: .relaxed)
    }

    func leave() {
        count.subtract(1, ordering: .relaxed)
    }

    var isEmpty: Bool { count.load(ordering: .relaxed) == 0 }
}
