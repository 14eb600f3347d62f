import Glibc
import Synchronization

/// The free space of the data directory, against the reserve kept for snapshots (`--disk-reserve-bytes`). Writes
/// are refused while the free space is below the reserve, so that the journal never takes the room a snapshot
/// needs for its second copy of the data: compaction can always run, and frees the space the journal took.
final class DiskSpace: Sendable {
    let path: String
    let reserve: Int
    /// The last reading: when (monotonic milliseconds) and the bytes free then.
    private let reading = Mutex<(at: Int64, free: Int)?>(nil)
    /// A reading is reused for this long: `statvfs` is cheap, but not free at 100,000 writes a second.
    static let readingMilliseconds: Int64 = 20

    init(path: String, reserve: Int) {
        self.path = path
        self.reserve = reserve
    }

    /// Bytes free for an unprivileged writer in the data directory's file system; nil if it cannot be read.
    var freeBytes: Int? {
        let now = MonotonicClock.now()
        if let last = reading.withLock({ $0 }), now - last.at < Self.readingMilliseconds { return last.free }
        var stats = statvfs()
        guard statvfs(path, &stats) == 0 else { return nil }
        let (product, overflow) = UInt64(stats.f_bavail).multipliedReportingOverflow(by: UInt64(stats.f_frsize))
        let free = overflow ? Int.max : Int(clamping: product)
        reading.withLock { $0 = (now, free) }
        return free
    }

    /// Whether a write may go ahead: the free space is at or above the reserve (or cannot be read, in which case
    /// the journal's own errors decide).
    var allowsWrites: Bool {
        guard reserve > 0, let free = freeBytes else { return true }
        return free >= reserve
    }
}
