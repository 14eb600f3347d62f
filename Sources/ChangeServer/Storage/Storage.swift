import Glibc
import Model
import Synchronization

/// Snapshots and compaction: when the journal has grown past `--snapshot-bytes`, it starts a new segment; at the
/// moment every record of the old segments is applied (and no later one), the collections are copied
/// (copy-on-write, so this is cheap) and a background thread writes the snapshot and drops the old segments.
/// Mutations are never held up for the length of a snapshot.
final class Storage: Sendable {
    private let directory: DataDirectory
    private let journal: FileJournal
    private let registry: Registry
    private let threshold: Int
    private let logger: Logger
    private let snapshotting = Atomic<Bool>(false)

    init(directory: DataDirectory, journal: FileJournal, registry: Registry, threshold: Int, logger: Logger) {
        self.directory = directory
        self.journal = journal
        self.registry = registry
        self.threshold = threshold
        self.logger = logger
    }

    /// A mutation was applied: called from the journal's callback, where mutations are applied in order.
    func committed() {
        guard journal.bytesSinceSnapshot >= threshold,
            snapshotting.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        journal.rotate { [self] next in
            guard let next else { return snapshotting.store(false, ordering: .releasing) }
            takeSnapshot(coveringBefore: next)
        }
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
            snapshotting.store(false, ordering: .releasing)
        }
    }
}
