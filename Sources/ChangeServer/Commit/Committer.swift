import Model

/// The write path, free of HTTP: a record is journaled; once it is durable it is applied on its collection's lane
/// (`Lanes`), where its changeset is also encoded once; the caller hears the outcome, then the feeds are told,
/// still on that lane (so that a fan-out never holds up the answer to the write that caused it). Records of one
/// collection take effect in journal order, those of different collections in parallel, so a large write to one
/// collection never holds up the others. A light record (an upsert, say) whose lane is idle is applied right where
/// the journal calls back, on the syncer thread, as if on its lane (`LaneRouter.hand`).
final class Committer: Sendable {
    /// What the feeds are told when a record took effect.
    enum Publication: Sendable {
        /// The collection or view moved to `changes.changeset.to`.
        case committed(FeedSubject, EncodedChangeset)
        case deleted(FeedSubject)
    }

    /// What became of a submitted record: `Executor.Outcome`, with the changeset encoded.
    enum Result: Sendable {
        /// The collection changed (or was created) and is now at `changes.changeset.to`.
        case committed(CollectionEntry, EncodedChangeset, created: Bool)
        /// Nothing changed: the version stays and the changeset is empty.
        case unchanged(CollectionEntry, EncodedChangeset)
        case deleted(CollectionEntry)
        /// The view was defined or redefined; `changes` is empty (`from == to`) when its content stayed the same.
        case viewDefined(ViewEntry, EncodedChangeset, created: Bool)
        case viewDeleted(ViewEntry)
        /// The record is durable but was refused when applied, which changed nothing.
        case rejected(Rejection)
        /// It could not be made durable and was not applied.
        case notDurable
    }

    let executor: Executor
    private let journal: Journal
    private let lanes: Lanes
    private let router: LaneRouter
    private let snapshots: Snapshots?
    private let metrics: Metrics
    private let publish: @Sendable (Publication) -> Void

    init(
        executor: Executor, journal: Journal, lanes: Lanes, snapshots: Snapshots?, metrics: Metrics,
        publish: @escaping @Sendable (Publication) -> Void
    ) {
        self.executor = executor
        self.journal = journal
        self.lanes = lanes
        router = LaneRouter(collections: executor.registry, views: executor.views)
        self.snapshots = snapshots
        self.metrics = metrics
        self.publish = publish
    }

    /// Journals `record` (`encoded`: its journal bytes, if made already); `report` runs on the record's lane, or
    /// in place on the syncer thread (`LaneRouter.hand`), once it is applied (or could not be made durable).
    /// - Throws: when storage cannot take the record at all; nothing was written then, and `report` does not run.
    func submit(
        _ record: JournalRecord, encoded: [UInt8]? = nil, then report: @escaping @Sendable (Result) -> Void
    ) throws(StorageError) {
        let bytes = encoded ?? RecordCodec.encode(record)
        let inPlace = journal.callsBackOnItsOwnThread
        try journal.append(bytes) { [self, count = bytes.count] durable in
            router.hand(record, bytes: count, to: lanes, inPlace: inPlace) {
                complete(record, durable: durable, waiting: false, report)
            } otherwise: { [self] in
                _ = complete(record, durable: durable, waiting: true, report)
            }
        }
    }

    /// Applies a durable record and reports its outcome, then tells the feeds (or reports a record that could not
    /// be made durable). Without `waiting`, false when that would have meant waiting for a lock: nothing was done.
    private func complete(
        _ record: JournalRecord, durable: Bool, waiting: Bool, _ report: @Sendable (Result) -> Void
    ) -> Bool {
        guard durable else {
            settle(record)
            report(.notDurable)
            return true
        }
        guard let (result, publications) = apply(record, waiting: waiting) else { return false }
        // A deletion's rows are purged as every deletion's are.
        if case .rejected(.collectionNotFound(let name)) = result, !record.deletesCollection {
            journal.noteMissingCollection(name)
        }
        report(result)
        publications.forEach(publish)
        return true
    }

    /// Applies a record another server committed, on its lane: a shared journal hands these in, in sequence order
    /// with this server's own records. Its changeset goes to the feeds like any other. It is bulk work as a local
    /// record of its kind and encoded size (`bytes`) would be. A definition that moved its view to another source
    /// is told to the journal (`Journal.remoteRecordMovedView`), as applied here: on the view's lanes, after the
    /// view's records before it.
    func applyRemote(_ record: JournalRecord, bytes: Int) {
        lanes.run(router.lanes(for: record), bulk: !LaneRouter.isSmall(record, bytes: bytes)) { [self] in
            let before = record.definedView.flatMap(executor.views.source(of:))
            apply(record, waiting: true)?.publications.forEach(publish)
            if let before, let after = record.definedView.flatMap(executor.views.source(of:)), after != before {
                journal.remoteRecordMovedView(to: after)
            }
        }
    }

    /// The journal's state and metrics, for `/healthz` and `/metrics`.
    var storeState: StoreState? { journal.storeState }
    /// Whether other servers write to the same journal (`Journal.isShared`).
    var isShared: Bool { journal.isShared }
    func storeMetricsText() -> String { journal.metricsText() }

    /// Runs `work` on the lane of `name`, off the event loops (a large body is decoded there, as `bulk` work):
    /// after every record of that collection handed in before, but for one given up in place meanwhile
    /// (`Lanes.runInPlaceIfIdle`), which runs after it. `work` must not read the collection (decoding does not).
    func onLane(of name: String, bulk: Bool = false, _ work: @escaping @Sendable () -> Void) {
        lanes.run(name, bulk: bulk, work)
    }

    /// Writes are refused for lack of space: compacts the journal if that can give some back (file journal).
    func compactForSpace() {
        snapshots?.compactForSpace()
    }

    /// Makes everything submitted durable and applied, as far as the journal allows at shutdown.
    func flush() {
        journal.flush()
    }

    /// Flushes and stops the journal.
    func close() {
        journal.close()
    }

    /// Tells the router what became of a view's record on its lanes: the view's source now.
    private func settle(_ record: JournalRecord) {
        switch record {
        case .defineView(let view, _, _, _, _), .deleteView(let view, _):
            router.settle(view: view, source: executor.views.source(of: view))
        case .put, .ops, .upsert, .delete:
            break
        }
    }

    /// Applies a durable record: its outcome, and what the feeds are to be told. Without `waiting`, nil when that
    /// would have meant waiting for a lock (`Executor.executeWithoutWaiting`): nothing changed.
    private func apply(_ record: JournalRecord, waiting: Bool) -> (result: Result, publications: [Publication])? {
        guard let outcome = waiting ? executor.execute(record) : executor.executeWithoutWaiting(record) else {
            return nil
        }
        defer { settle(record) }
        let result: Result
        var publications: [Publication] = []
        func publish(_ publication: Publication) { publications.append(publication) }
        switch outcome {
        case .committed(let entry, let changeset, let created, let views):
            metrics.mutationCommitted()
            let changes = EncodedChangeset(changeset)
            publish(.committed(entry, changes))
            for view in views { publish(.committed(view.entry, EncodedChangeset(view.changeset))) }
            result = .committed(entry, changes, created: created)
        case .unchanged(let entry, let changeset):
            result = .unchanged(entry, EncodedChangeset(changeset))
        case .deleted(let entry, let views):
            metrics.mutationCommitted()
            publish(.deleted(entry))
            for view in views { publish(.committed(view.entry, EncodedChangeset(view.changeset))) }
            result = .deleted(entry)
        case .viewCommitted(let entry, let changeset, let created):
            let changes = EncodedChangeset(changeset)
            publish(.committed(entry, changes))
            result = .viewDefined(entry, changes, created: created)
        case .viewUnchanged(let entry, let changeset):
            result = .viewDefined(entry, EncodedChangeset(changeset), created: false)
        case .viewDeleted(let entry):
            publish(.deleted(entry))
            result = .viewDeleted(entry)
        case .rejected(let rejection):
            result = .rejected(rejection)
        }
        snapshots?.committed()
        return (result, publications)
    }
}
