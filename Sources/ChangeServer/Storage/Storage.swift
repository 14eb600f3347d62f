import Glibc
import Model

/// Snapshots and compaction: when the journal has grown past `--snapshot-bytes`, it starts a new segment, and
/// once every record of the old ones is applied, a background thread writes a snapshot of all collections and
/// drops the segments it covers. The loop only copies the collections (copy-on-write) and goes on.
final class Storage: @unchecked Sendable {
    // @unchecked: `snapshotting` is touched only on the loop thread; the snapshot thread gets its own copies.
    private let directory: DataDirectory
    private let journal: FileJournal
    private let registry: Registry
    private let threshold: Int
    private let logger: Logger
    private let post: @Sendable (@escaping @Sendable () -> Void) -> Void
    private var snapshotting = false

    init(
        directory: DataDirectory, journal: FileJournal, registry: Registry, threshold: Int, logger: Logger,
        post: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void
    ) {
        self.directory = directory
        self.journal = journal
        self.registry = registry
        self.threshold = threshold
        self.logger = logger
        self.post = post
    }

    /// A mutation was applied (loop thread).
    func committed() {
        guard !snapshotting, journal.bytesSinceSnapshot >= threshold else { return }
        snapshotting = true
        let next: UInt64
        let lastTicket: UInt64
        do throws(StartupError) {
            (next, lastTicket) = try journal.rotate()
        } catch {
            logger.error("cannot start a new journal segment: \(error)")
            snapshotting = false
            return
        }
        // Records of the old segments still waiting for their sync are applied, in order, before this runs.
        journal.whenDurable(lastTicket) { [self] _ in post { [self] in takeSnapshot(coveringBefore: next) } }
    }

    private func takeSnapshot(coveringBefore next: UInt64) {
        let collections = registry.all().map { entry in (entry.name, entry.content.withLock { $0 }) }
        startThread { [self] in
            let started = MonotonicClock.now()
            let bytes = SnapshotFile.encode(nextSegment: next, collections: collections)
            if let failure = SnapshotFile.write(bytes, in: directory) {
                logger.error("snapshot failed (\(failure)); the journal is kept and it will be tried again")
            } else {
                for segment in directory.segments() where segment < next { unlink(directory.segmentPath(segment)) }
                directory.syncDirectory()
                logger.info(
                    "snapshot of \(collections.count) collections (\(bytes.count) bytes) written in "
                        + "\(MonotonicClock.now() - started) ms; journal segments before \(next) dropped")
            }
            post { [self] in snapshotting = false }
        }
    }
}
