import CHTTPD
import Dispatch
import Glibc

/// Gives memory that was freed back to the system. glibc's allocator keeps freed memory for later use, and gives
/// back by itself only what lies at the top of its main heap: after a large collection was replaced or deleted, a
/// server kept some 100 MB it no longer used (200,000 items replaced three times, then deleted: 143 MB resident
/// where `malloc_trim` brought it to 44), which in a container counts against its memory limit for good.
///
/// Every `period`, a thread of its own reads the allocator's free bytes; when they have grown by `growth` since
/// their lowest point after the last trim (memory freed, not merely kept free through fragmentation, which would
/// call for a trim every time), it calls `malloc_trim`. A trim holds each of the allocator's arenas while it walks
/// its free chunks (milliseconds for hundreds of megabytes), so it runs only after such a release.
final class MemoryTrimmer: Sendable {
    static let period = DispatchTimeInterval.seconds(10)
    static let growth = 16 << 20

    private let stopping = DispatchSemaphore(value: 0)
    // Written once, by `init`, before any other thread can see the object.
    private nonisolated(unsafe) var thread: JoinableThread?

    init(logger: Logger) {
        thread = JoinableThread { [stopping] in
            var lowest = Self.freeBytes()
            while stopping.wait(timeout: .now() + Self.period) == .timedOut {
                let free = Self.freeBytes()
                lowest = min(lowest, free)
                guard free - lowest >= Self.growth else { continue }
                let before = Self.residentBytes()
                let started = MonotonicClock.nanoseconds()
                chttpd_heap_trim()
                let milliseconds = (MonotonicClock.nanoseconds() - started) / 1_000_000
                lowest = Self.freeBytes()
                let after = Self.residentBytes()
                logger.log(
                    .info,
                    "gave \(max(0, before - after) >> 20) MiB of freed memory back to the system "
                        + "(\(free >> 20) MiB were free): \(after >> 20) MiB resident, in \(milliseconds) ms")
            }
        }
    }

    /// Stops the thread and waits for it.
    func stop() {
        stopping.signal()
        thread?.join()
    }

    /// Bytes the allocator holds free, in every arena.
    static func freeBytes() -> Int { Int(clamping: chttpd_heap_free_bytes()) }

    /// The process's resident memory (`/proc/self/statm`), in bytes; 0 when it cannot be read.
    static func residentBytes() -> Int {
        guard let statm = readProcFile("/proc/self/statm") else { return 0 }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * sysconf(Int32(_SC_PAGESIZE))
    }
}
