import Glibc
import Model

/// Rebuilds the collections at start: the latest snapshot, then every journal record after it, in order.
/// A torn or corrupt tail of the last segment (a crash in the middle of a write) is cut with a warning, newest
/// segments that hold no record (a rotation that did not complete) are removed first; anything else that does
/// not hold (a corrupt record followed by valid ones, a missing segment or snapshot) stops the server rather
/// than serving wrong data.
enum Recovery {
    /// Where the journal goes on: the segment to append to and its valid size (0 for a new segment).
    struct Position {
        var segment: UInt64
        var size: Int
        /// Bytes of journal the latest snapshot does not cover: what counts toward the next one.
        var bytesSinceSnapshot = 0
        /// Whether every collection and view got a new epoch (`EpochRenewal`): a snapshot is due at once.
        var renewedEpochs = false
        /// Source items the replayed view definitions were evaluated on: a snapshot holding those views spares the
        /// next start that work (`Snapshots.compactAfterStart`).
        var definitionItems = 0
    }

    /// Puts a snapshot's collections and views in place; a view's index is rebuilt from its source, which must be
    /// in place already or in the same snapshot. A field that several views of a source gate on is read once per
    /// item for all of them (`GateIndex`), and each of those views evaluates its definition only on the items
    /// that can pass its gate.
    static func restore(_ snapshot: SnapshotFile.Contents, into executor: Executor) throws(StartupError) {
        for collection in snapshot.collections {
            _ = executor.registry.insert(CollectionEntry(name: collection.name, content: collection.content))
        }
        var definitions: [ViewDefinition] = []
        for view in snapshot.views {
            guard let definition = try? ViewDefinition(json: view.definition.bytes) else {
                throw StartupError("the snapshot's view \(view.name) has an invalid definition")
            }
            definitions.append(definition)
        }
        var gates: [String: GateIndex] = [:]
        for (name, shared) in sharedGates(of: definitions) {
            if let source = executor.registry.entry(name)?.content.withLock({ $0 }) {
                gates[name] = GateIndex(source, gates: shared)
            }
        }
        for (view, definition) in zip(snapshot.views, definitions) {
            let source = executor.registry.entry(definition.source)?.content.withLock { $0 }
            let live = LiveView(
                restoring: view.content, definition: definition, source: source, gates: gates[definition.source])
            executor.views.insert(ViewEntry(name: view.name, live: live), definition: definition)
        }
    }

    /// By source, the gates on a field that more than one view of the source tests: a field one view alone tests
    /// would be read once for it either way.
    private static func sharedGates(of definitions: [ViewDefinition]) -> [String: [ViewGate]] {
        var byField: [String: [JSONPointer: [ViewGate]]] = [:]
        for definition in definitions {
            guard let gate = definition.gate else { continue }
            byField[definition.source, default: [:]][gate.pointer, default: []].append(gate)
        }
        return byField.mapValues { fields in fields.values.filter { $0.count > 1 }.flatMap { $0 } }
            .filter { !$0.value.isEmpty }
    }

    static func run(_ directory: DataDirectory, executor: Executor, logger: Logger) throws(StartupError) -> Position {
        let started = MonotonicClock.now()
        var nextSegment: UInt64 = 1
        var fromSnapshot = (collections: 0, views: 0)
        var hasSnapshot = false
        let snapshotBytes: [UInt8]?
        do throws(FileReadFailure) {
            snapshotBytes = try readFile(directory.snapshotPath)
        } catch {
            guard error.isMissing else {
                throw StartupError("cannot read the snapshot \(directory.snapshotPath): \(error)")
            }
            snapshotBytes = nil
        }
        if let bytes = snapshotBytes {
            let snapshot: SnapshotFile.Contents
            do throws(BinaryReader.Malformed) {
                snapshot = try SnapshotFile.decode(bytes, limits: executor.limits)
            } catch {
                if let format = SnapshotFile.newerFormat(of: bytes) {
                    throw StartupError(
                        "the snapshot \(directory.snapshotPath) was written by a newer ChangeServer (snapshot "
                            + "format \(format); this build reads 1 to \(SnapshotFile.version)): run that build or a "
                            + "later one, and keep the file (the journal before it is gone)")
                }
                throw StartupError(
                    "the snapshot \(directory.snapshotPath) is corrupt; refusing to start on wrong data. Restore the "
                        + "data directory from a backup: the journal segments the snapshot covered are gone")
            }
            try restore(snapshot, into: executor)
            nextSegment = snapshot.nextSegment
            hasSnapshot = true
            fromSnapshot = (snapshot.collections.count, snapshot.views.count)
        }
        var segments: [UInt64]
        do throws(FileReadFailure) {
            segments = try directory.segments()
        } catch {
            throw StartupError("cannot list the data directory \(directory.path): \(error)")
        }
        for covered in segments where covered < nextSegment {
            unlink(directory.segmentPath(covered))
        }
        segments.removeAll { $0 < nextSegment }
        // The segment a snapshot names was made before the snapshot was written, and is removed only by a later
        // snapshot: without it, whatever was written after the snapshot is gone, which is not a start to make
        // silently.
        if hasSnapshot && segments.isEmpty {
            throw StartupError(
                "journal segment \(nextSegment) is missing: the snapshot was written after it was made, so the "
                    + "mutations after the snapshot are lost; to start from the snapshot alone, create "
                    + "\(directory.segmentPath(nextSegment)) as an empty file")
        }
        if let first = segments.first, first != nextSegment {
            throw StartupError(
                first > 1 && nextSegment == 1
                    ? "journal segments start at \(first) but there is no snapshot covering the ones before: "
                        + "\(directory.snapshotPath) is missing; restore it, or the data directory, from a backup"
                    : "journal segment \(nextSegment) is missing: restore the data directory from a backup (the "
                        + "segments after it cannot be replayed without it)")
        }
        for (index, number) in segments.enumerated() where number != nextSegment + UInt64(index) {
            throw StartupError(
                "journal segment \(nextSegment + UInt64(index)) is missing: restore the data directory from a backup "
                    + "(the segments after it cannot be replayed without it)")
        }
        // After the snapshot's own checks, whose message says how to start from a snapshot alone.
        try JournalHead.check(directory, newest: segments.last)
        try dropEmptyTail(&segments, directory, logger: logger)
        // The newest segment is written to (or synced) once the replay is done: one this user may not write (a
        // volume's files owned by another user) was refused only after the whole replay, which each restart then
        // did again.
        if let newest = segments.last, access(directory.segmentPath(newest), R_OK | W_OK) != 0 {
            throw StartupError(
                "cannot open the journal \(directory.segmentPath(newest)) for writing: "
                    + "\(String(cString: strerror(errno))) (the user the server runs as, uid \(getuid()), must be able to "
                    + "write the data directory's files: mend their owner or their mode)")
        }
        var records = 0
        var bytesRead = 0
        var position = Position(segment: nextSegment, size: 0)
        /// Why this start renews every epoch (`EpochRenewal`), once it knows.
        var renewal: String?
        var legacyIDs = LegacyIDSpellings()
        var progress = ReplayProgress(started: started, segments: segments.count) { logger.log(.notice, $0) }
        var definitionItems = 0
        for (index, number) in segments.enumerated() {
            let isLast = index == segments.count - 1
            progress.segment = index
            let (count, size, version) = try replay(
                directory, number, isFirst: index == 0, isLast: isLast, afterSnapshot: hasSnapshot && index == 0,
                executor: executor, renewal: &renewal, legacyIDs: &legacyIDs, progress: &progress,
                definitionItems: &definitionItems, logger: logger)
            records += count
            bytesRead += size
            position = Position(segment: number, size: size, bytesSinceSnapshot: bytesRead)
            if isLast && version != JournalFormat.version {
                // A segment of an older format is not written to again: the journal goes on in a new one, after
                // this one is on disk (what it holds may be in the kernel's cache only, and the records written
                // next may depend on it).
                try sync(directory.segmentPath(number))
                position = Position(segment: number + 1, size: 0, bytesSinceSnapshot: bytesRead)
            }
        }
        position.definitionItems = definitionItems
        if renewal == nil, let loss = EpochRenewal.lossSinceLastRun(directory) {
            renewal = try EpochRenewal.mark(directory, reason: loss, logger: logger)
        }
        if let reason = renewal ?? EpochRenewal.pendingReason(directory) {
            EpochRenewal.renew(executor)
            position.renewedEpochs = true
            logger.warning(
                "every collection and view gets a new epoch, so that clients that saw versions this start may have "
                    + "lost start over from a snapshot (410 on their next poll) instead of taking other content "
                    + "for them: \(reason)")
        }
        let items = executor.registry.all().reduce(0) { total, entry in total + entry.content.withLock { $0.itemCount }
        }
        logger.log(
            .notice,
            "recovered \(executor.registry.count) collections (\(items) items) and \(executor.views.count) views: "
                + "\(fromSnapshot.collections) collections and \(fromSnapshot.views) views from the snapshot, "
                + "\(records) journal records (\(bytesRead) bytes) replayed in \(MonotonicClock.now() - started) ms")
        return position
    }

    /// Replays one segment; returns the records applied, the segment's valid size and its format version.
    ///
    /// A bad frame (torn, corrupt or cut short) ends the last segment when nothing valid could have been
    /// acknowledged after it, and is cut, on disk before writing goes on; otherwise recovery refuses to start.
    /// - Version 1: a bad frame followed by no whole frame is the tail of a write torn by a crash.
    /// - Version 2: zeros after the last frame are the zeros written ahead (`JournalFormat.preallocation`), and
    ///   end a segment. A segment before the last must end with the sync mark written when the journal moved on
    ///   (naming its own offset), or its last records could be lost unnoticed. A bad frame in the last segment
    ///   is damage only when a sync mark after it names an offset past it (`JournalFormat.hasMark(in:syncedPast:)`);
    ///   otherwise it lies in what was being written when the machine stopped, never synced, so never
    ///   acknowledged, and a sync over zeros may have kept a later sector of it and lost an earlier one.
    private static func replay(
        _ directory: DataDirectory, _ number: UInt64, isFirst: Bool, isLast: Bool, afterSnapshot: Bool,
        executor: Executor, renewal: inout String?, legacyIDs: inout LegacyIDSpellings, progress: inout ReplayProgress,
        definitionItems: inout Int, logger: Logger
    ) throws(StartupError) -> (records: Int, size: Int, version: UInt32) {
        let path = directory.segmentPath(number)
        let bytes: [UInt8]
        do throws(FileReadFailure) {
            bytes = try readFile(path)
        } catch {
            throw StartupError("cannot read the journal \(path): \(error)")
        }
        // A segment that ends inside its header: this build makes a segment whole before it is named
        // (`FileJournal.openSegment`), so it was cut short since, and whatever it held is gone; starting it anew
        // served an empty store as if nothing had been written. (A build before 23a8f5a could leave one by a crash
        // while making it: during its very first start, or a rotation, whose leftover `dropEmptyTail` meets first.)
        // An empty file right after a snapshot is the operator's way to start from the snapshot alone, which the
        // message of a missing segment gives.
        if bytes.isEmpty && isLast && afterSnapshot {
            logger.warning("the journal \(path) is empty: starting it anew after the snapshot")
            renewal = try EpochRenewal.mark(
                directory, reason: "the journal was started anew from the snapshot alone", logger: logger)
            return (0, 0, JournalFormat.version)
        }
        guard bytes.count >= JournalFormat.headerSize else {
            let way =
                !isLast
                ? " (the segments after it go on from it)"
                : afterSnapshot
                    ? ", or, to start from the snapshot alone, empty it (truncate -s 0 \(path))"
                    : isFirst
                        ? ", or, if this server never took a write (a build before 23a8f5a that crashed during its "
                            + "very first start), remove the file" : ""
            throw StartupError(
                "the journal \(path) ends inside its header (\(bytes.count) \(bytes.count == 1 ? "byte" : "bytes")): "
                    + "it was cut short, and the mutations it held are lost; refusing to start on wrong data. Restore "
                    + "the data directory from a backup\(way)")
        }
        guard let version = JournalFormat.version(ofHeader: bytes[...]) else {
            if let newer = JournalFormat.newerVersion(ofHeader: bytes[...]) {
                throw StartupError(
                    "the journal \(path) was written by a newer ChangeServer (journal format \(newer); this "
                        + "build reads \(JournalFormat.versions.lowerBound) to \(JournalFormat.versions.upperBound)): "
                        + "run that build or a later one")
            }
            throw StartupError(
                "the journal \(path) is not a ChangeServer journal of format "
                    + JournalFormat.versions.map(String.init).joined(separator: " or "))
        }
        var offset = JournalFormat.headerSize
        var records = 0
        /// Whether the last frame read is a sync mark naming its own offset (version 2).
        var endsWithMark = false
        func ended() throws(StartupError) -> (records: Int, size: Int, version: UInt32) {
            guard isLast || version < 2 || endsWithMark else {
                throw StartupError(
                    "the journal \(path) ends at byte \(offset) without the mark written when the journal moved on "
                        + "to the next segment: records may be missing; refusing to start on wrong data")
            }
            return (records, offset, version)
        }
        while offset < bytes.count {
            guard let (payload, end) = JournalFormat.payload(in: bytes, at: offset) else {
                if version >= 2 && bytes[offset...].allSatisfy({ $0 == 0 }) { return try ended() }
                let isDamage =
                    version >= 2
                    ? JournalFormat.hasMark(in: bytes, syncedPast: offset)
                    : JournalFormat.hasFrame(in: bytes, after: offset)
                guard isLast, !isDamage else {
                    throw StartupError(
                        isDamage
                            ? "the journal \(path) has a corrupt record at byte \(offset) followed by valid ones; "
                                + "refusing to start on wrong data. Restore the data directory from a backup"
                            : "the journal \(path) has a bad record at byte \(offset) and nothing valid after it, "
                                + "though later segments follow it: it was cut short or damaged there, and the records "
                                + "after it are lost; refusing to start on wrong data. Restore the data directory from "
                                + "a backup")
                }
                // The zeros written ahead of the records (format 2) are not data: only the bytes up to the last
                // one that is not zero were lost.
                let dataEnd = (bytes.lastIndex { $0 != 0 } ?? offset) + 1
                logger.warning(
                    "the journal \(path) ends with a torn or corrupt record: dropped \(max(0, dataEnd - offset)) bytes "
                        + "at \(offset)\(dataEnd < bytes.count ? " (and the zeros written ahead after them)" : "")")
                renewal = try EpochRenewal.mark(
                    directory, reason: "the journal's tail was cut at byte \(offset) of \(path)", logger: logger)
                try sync(path, cuttingAt: offset)
                return (records, offset, version)
            }
            defer { offset = end }
            if version >= 2, let synced = JournalFormat.synced(byMark: payload) {
                endsWithMark = synced == offset
                continue
            }
            endsWithMark = false
            let record: JournalRecord
            do throws(BinaryReader.Malformed) {
                record = try RecordCodec.decode(payload)
            } catch {
                throw StartupError("the journal \(path) has an unreadable record at byte \(offset)")
            }
            if version < 2, !legacyIDs.mayHaveDiverged,
                legacyIDs.mayReplayDifferently(record, in: executor.registry)
            {
                legacyIDs.mayHaveDiverged = true
                let reason =
                    "the journal \(path) holds at byte \(offset) a record of collection \"\(record.name)\" that "
                    + "names an id the collection also holds in another Unicode spelling (\"é\" as one code point "
                    + "and as e with an accent): builds before 2026-12-03 (9028546) took such ids for one, this "
                    + "build compares their bytes, so this record and later ones may give other content than they "
                    + "did under the same versions; check that collection's content"
                logger.error(reason)
                if renewal == nil { renewal = try EpochRenewal.mark(directory, reason: reason, logger: logger) }
            }
            executor.replay(record)
            definitionItems += read(byReplayed: record, in: executor)?.items ?? 0
            records += 1
            progress.replayed(at: offset, of: bytes.count)
        }
        return try ended()
    }

    /// What a view definition just replayed read: the source it left the view on, as the executor read it (the
    /// definition is not parsed again), and that source's item count; nil for another record, or a definition that
    /// left no view.
    static func read(byReplayed record: JournalRecord, in executor: Executor) -> (source: String, items: Int)? {
        guard let source = record.definedView.flatMap(executor.views.source(of:)) else { return nil }
        return (source, executor.registry.entry(source)?.content.withLock { $0.itemCount } ?? 0)
    }

    /// Syncs a segment, first cut at `size` if given: the next sync mark will say that everything before it is on
    /// disk.
    private static func sync(_ path: String, cuttingAt size: Int? = nil) throws(StartupError) {
        let descriptor = open(path, O_RDWR | O_CLOEXEC)
        defer { if descriptor >= 0 { close(descriptor) } }
        guard descriptor >= 0, size.map({ ftruncate(descriptor, off_t($0)) == 0 }) ?? true, fdatasync(descriptor) == 0
        else {
            throw StartupError("cannot cut or sync the journal \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Removes the newest segments when they hold no record (nothing, or a part of the header only: a rotation
    /// that failed, or a crash right after one), unless nothing else is left: the segment before them is where
    /// writing stopped, so its torn tail is cut as the last segment's would be, and the journal goes on there.
    private static func dropEmptyTail(
        _ segments: inout [UInt64], _ directory: DataDirectory, logger: Logger
    ) throws(StartupError) {
        guard let written = segments.lastIndex(where: { !isEmpty(directory.segmentPath($0)) }),
            written < segments.count - 1
        else { return }
        // Noted first: a start that stops before the journal opens (and notes its segment) must not find the head
        // naming a segment removed here.
        JournalHead.record(segments[written], in: directory, logger: logger)
        for number in segments[(written + 1)...] {
            let path = directory.segmentPath(number)
            // A header and nothing else: a rotation that did not complete. Less than a header: this build makes a
            // segment whole before it is named, so it was cut short since, and its records are lost.
            var info = stat()
            guard stat(path, &info) == 0, info.st_size == JournalFormat.headerSize else {
                throw StartupError(
                    "the journal \(path) ends inside its header: it was cut short, and the mutations it held are "
                        + "lost; refusing to start on wrong data. Restore the data directory from a backup, or, if a "
                        + "build before 23a8f5a crashed while making it, remove the file")
            }
            guard unlink(path) == 0 else {
                throw StartupError("cannot remove the empty journal \(path): \(String(cString: strerror(errno)))")
            }
            logger.warning("the journal \(path) holds no record (a rotation that did not complete): removed it")
        }
        segments.removeSubrange((written + 1)...)
        directory.syncDirectory()
    }

    /// Whether the file holds at most a part of a segment header, and nothing else.
    private static func isEmpty(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0, info.st_size <= JournalFormat.headerSize, let bytes = readWholeFile(path) else {
            return false
        }
        return JournalFormat.isHeaderPrefix(bytes)
    }
}
