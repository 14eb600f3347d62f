import Dispatch
import Glibc
import Model
import Synchronization

/// Snapshots and compaction: when the journal has grown past `--snapshot-bytes`, it starts a new segment; at the
/// point of the record order where every record of the old segments is applied (and no later one), each
/// collection is copied on its own lane (copy-on-write, so this is cheap) and a background thread writes the
/// snapshot and drops the old segments. Mutations are never held up for the length of a snapshot.
final class Snapshots: Sendable {
    private let directory: DataDirectory
    private let journal: FileJournal
    private let registry: Registry
    private let views: ViewRegistry
    private let lanes: Lanes
    private let threshold: Int
    private let logger: Logger
    private let snapshotting = Atomic<Bool>(false)
    /// When (monotonic milliseconds) the last snapshot for lack of space started.
    private let lastForSpace = Atomic<Int64>(Int64.min / 2)
    /// Snapshots for lack of space start at most this often: one that left the free space below the reserve (the
    /// data itself fills the disk) is not taken again and again while writes are refused.
    static let forSpaceMilliseconds: Int64 = 10_000
    /// When (monotonic milliseconds) a snapshot may start again after one failed.
    private let retryAt = Atomic<Int64>(Int64.min / 2)
    /// Whether a snapshot is due whatever the journal's size: the last one failed after the journal moved on to a
    /// new segment (the journal's count of bytes since a snapshot started over then, and would have to grow by
    /// `threshold` again, which it never does while writes are refused for the disk's reserve, before the next
    /// try), or the start replayed definitions worth one (`compactAfterStart`).
    private let isOwed = Atomic<Bool>(false)
    /// A snapshot that failed (a full disk, no thread) is tried again this long after, by the next record applied:
    /// not by every record applied meanwhile, each of which logged the failure again (hundreds of lines a second).
    static let retryMilliseconds: Int64 = 1_000

    init(
        directory: DataDirectory, journal: FileJournal, registry: Registry, views: ViewRegistry, lanes: Lanes,
        threshold: Int, logger: Logger
    ) {
        self.views = views
        self.directory = directory
        self.journal = journal
        self.registry = registry
        self.lanes = lanes
        self.threshold = threshold
        self.logger = logger
    }

    /// A record was applied (called on its lane): starts a snapshot when the journal has grown enough.
    func committed() {
        guard journal.bytesSinceSnapshot >= threshold || isOwed.load(ordering: .relaxed),
            MonotonicClock.now() >= retryAt.load(ordering: .relaxed),
            snapshotting.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        rotateAndSnapshot()
    }

    /// The start replayed a journal already past `threshold` (grown under a larger `--snapshot-bytes`, or by a
    /// server stopped before its snapshot was written): the snapshot starts now, not at the next write, which an
    /// idle server may not get for hours while every restart replays the whole journal again. So it does when the
    /// replayed view definitions were evaluated on `definitionsWorthASnapshot` source items or more
    /// (`definitionItems`), however small their records: each definition reads its whole source when replayed,
    /// and a view restored from a snapshot reads only what its gate lets through (`GateIndex`). 5,000 views of
    /// one owner each over 15,000 items, defined since the last snapshot, took 8.8 s to replay at every start,
    /// their 1.8 MB of journal far below the default threshold; from a snapshot, 0.3 s.
    func compactAfterStart(definitionItems: Int) {
        if definitionItems >= Self.definitionsWorthASnapshot {
            logger.info(
                "snapshotting now: the start replayed view definitions that read \(definitionItems) of their items")
            isOwed.store(true, ordering: .relaxed)
        }
        committed()
    }

    /// Source items re-evaluated by replayed definitions that make a snapshot due at once: about a second of
    /// replay on the machine that measured it (75 million took 8.8 s).
    static let definitionsWorthASnapshot = 10_000_000

    /// The free space fell below the reserve and writes are refused, so the journal no longer grows toward
    /// `threshold`: a snapshot starts now (on a thread of its own) if the journal holds anything it would compact,
    /// so that the space it takes comes back without a restart. Callable from any thread; cheap when it does
    /// nothing.
    func compactForSpace() {
        let now = MonotonicClock.now()
        guard now - lastForSpace.load(ordering: .relaxed) >= Self.forSpaceMilliseconds,
            !snapshotting.load(ordering: .relaxed), journal.bytesSinceSnapshot > 0 || isOwed.load(ordering: .relaxed),
            snapshotting.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        lastForSpace.store(now, ordering: .relaxed)
        logger.warning("the free space is below --disk-reserve-bytes: compacting the journal into a snapshot now")
        if !startThread({ [self] in rotateAndSnapshot() }) { couldNotStartThread() }
    }

    /// Writes a snapshot now and waits for it, before the server takes any write: the one that makes new epochs
    /// durable (`EpochRenewal`), since replay must meet them before the writes made under them.
    /// - Throws: when it cannot be written: the start stops, and the next one renews the epochs again.
    func writeAtStart() throws(StartupError) {
        let switched = DispatchSemaphore(value: 0)
        let segment = Mutex<UInt64?>(nil)
        journal.rotate { number in
            segment.withLock { $0 = number }
            switched.signal()
        }
        logger.log(.notice, "writing the snapshot that holds the new epochs before taking any write")
        // Bounded: the syncer that switches segments (`--fsync always`) might not have started (a thread limit).
        guard switched.wait(timeout: .now() + .seconds(60)) == .success, let next = segment.withLock({ $0 }) else {
            throw StartupError("cannot start the journal segment after the snapshot that holds the new epochs")
        }
        let collections = registry.all().map { ($0.name, $0.content.withLock { $0 }) }.sorted { $0.0 < $1.0 }
        let saved = views.sources.flatMap { views.saved(feedingFrom: $0) }.sorted { $0.name < $1.name }
        if let failure = write(collections, saved, coveringBefore: next) {
            throw StartupError(
                "cannot write the snapshot that holds the new epochs (\(failure)); free some space and start again")
        }
    }

    /// The process is at its thread limit: no snapshot now, and a record that finds the journal grown tries again
    /// (left set, `snapshotting` would keep every later snapshot from starting, and the journal would grow for
    /// good).
    private func couldNotStartThread() {
        logger.error("cannot start a thread to write a snapshot; the journal is kept and it will be tried again")
        failed()
    }

    /// A snapshot did not happen (logged where it failed): the next one starts `retryMilliseconds` from now.
    private func failed() {
        retryAt.store(MonotonicClock.now() + Self.retryMilliseconds, ordering: .relaxed)
        snapshotting.store(false, ordering: .releasing)
    }

    private func rotateAndSnapshot() {
        journal.rotate { [self] next in
            guard let next else { return failed() }
            // Owed until it is written: should it fail, the next try need not wait for the journal to grow again.
            isOwed.store(true, ordering: .relaxed)
            takeSnapshot(coveringBefore: next)
        }
    }

    /// Called by the journal at the rotation point, before any record of segment `next` is handed to a lane. Each
    /// collection is copied on its lane together with the views it feeds (a view's records run on its source's
    /// lane too).
    private func takeSnapshot(coveringBefore next: UInt64) {
        let copies = Mutex<
            (collections: [(name: String, content: VersionedCollection)], views: [SnapshotFile.SavedView])
        >(
            ([], []))
        lanes.visitAtConsistentPoint(
            names: { registry.all().map(\.name) + views.sources },
            visit: { [registry, views] name in
                let content = registry.entry(name)?.content.withLock { $0 }
                let saved = views.saved(feedingFrom: name)
                copies.withLock { copies in
                    if let content { copies.collections.append((name, content)) }
                    copies.views += saved
                }
            },
            then: { [self] in
                let (collections, views) = copies.withLock { $0 }
                let started = startThread { [self] in
                    write(
                        collections.sorted { $0.name < $1.name }, views.sorted { $0.name < $1.name },
                        coveringBefore: next)
                }
                if !started { couldNotStartThread() }
            })
    }

    /// Writes the snapshot and drops the segments it covers; the failure, logged, when it could not be written.
    @discardableResult
    private func write(
        _ collections: [(name: String, content: VersionedCollection)], _ views: [SnapshotFile.SavedView],
        coveringBefore next: UInt64
    ) -> String? {
        let started = MonotonicClock.now()
        let bytes = SnapshotFile.encode(nextSegment: next, collections: collections, views: views)
        if let failure = SnapshotFile.write(bytes, in: directory) {
            logger.error("snapshot failed (\(failure)); the journal is kept and it will be tried again")
            failed()
            return failure
        }
        isOwed.store(false, ordering: .relaxed)
        EpochRenewal.clear(directory)
        // Segments it cannot list now are left for the next snapshot or start to drop.
        for segment in (try? directory.segments()) ?? [] where segment < next { unlink(directory.segmentPath(segment)) }
        directory.syncDirectory()
        logger.info(
            "snapshot of \(collections.count) collections and \(views.count) views (\(bytes.count) bytes) written in "
                + "\(MonotonicClock.now() - started) ms; journal segments before \(next) dropped")
        snapshotting.store(false, ordering: .releasing)
        return nil
    }
}
