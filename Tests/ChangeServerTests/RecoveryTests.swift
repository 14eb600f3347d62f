import Foundation
import Model
import ProcessSupport
import Testing

@testable import ChangeServer

/// Recovery from journal files written byte by byte, in-process.
@Suite struct RecoveryTests {
    static let records: [JournalRecord] = [
        .put(collection: "c", epoch: "epoch1", sections: [Section(id: "s", items: [Item(id: "a")])], conditions: .none),
        .ops(
            collection: "c", ops: [.insertItems(at: ItemPosition(section: .id("s"), index: 1), items: [Item(id: "b")])],
            conditions: .none),
        .upsert(
            collection: "c", id: "z", data: JSONData(canonical: "{\"k\":1}"), section: .index(0), index: 0,
            conditions: JournalRecord.Conditions(ifMatch: "\"epoch1.2\"", ifNoneMatch: nil)),
    ]

    /// The journal bytes of `records` in format `version`, each record a sync pass of its own (after a sync mark
    /// naming where the pass starts, from version 2 on, as the syncer writes them), and where the last record's
    /// frame starts.
    static func journal(_ records: [JournalRecord], version: UInt32 = JournalFormat.version) -> (
        bytes: [UInt8], lastFrame: Int
    ) {
        var bytes = JournalFormat.header(version: version)
        var lastFrame = bytes.count
        for record in records {
            if version >= 2 { bytes += JournalFormat.frame(JournalFormat.mark(synced: bytes.count), at: bytes.count) }
            lastFrame = bytes.count
            bytes += JournalFormat.frame(RecordCodec.encode(record), at: bytes.count)
        }
        return (bytes, lastFrame)
    }

    /// Recovers a directory holding `bytes` as segment 1; the registry, or the startup error.
    static func recover(_ bytes: [UInt8]) throws -> (Registry, Recovery.Position, [UInt8]) {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory.open(path)
        try #require(FileManager.default.createFile(atPath: directory.segmentPath(1), contents: Data(bytes)))
        let registry = Registry()
        let position = try Recovery.run(
            directory, executor: Executor(registry: registry, limits: HistoryLimits()), logger: Logger(level: .critical)
        )
        return (registry, position, readWholeFile(directory.segmentPath(1)) ?? [])
    }

    static func items(_ registry: Registry) -> [String] {
        registry.entry("c")?.content.withLock { $0.snapshot().flatMap { $0.items.map(\.id) } } ?? []
    }

    @Test func recordsRoundTrip() throws {
        let every: [Op] = [
            .insertSections(
                at: 0, sections: [Section(id: "n", data: JSONData(canonical: "1"), items: [Item(id: "i")])]),
            .deleteSections([.index(3), .id("x")]), .moveSection(.id("a"), to: -1),
            .updateSection(.index(Int.max), data: .null),
            .insertItems(at: ItemPosition(section: .index(Int.min), index: 2), items: [Item(id: "é")]),
            .deleteItems([.id("q"), .path(.id("s"), 4)]),
            .moveItem(.path(.index(0), 0), to: ItemPosition(section: .id("t"), index: 9)),
            .updateItems([Item(id: "u", data: JSONData(canonical: "[true]"))]),
        ]
        let records =
            Self.records + [
                .ops(collection: "c", ops: every, conditions: JournalRecord.Conditions(ifMatch: nil, ifNoneMatch: "*")),
                .delete(collection: "c", conditions: .none),
                .upsert(collection: "c", id: "n", data: .null, section: nil, index: nil, conditions: .none),
            ]
        for record in records {
            #expect(try RecordCodec.decode(RecordCodec.encode(record)) == record)
        }
    }

    /// Builds before 2026-12-03 took ids that spell the same Unicode text for one ("é" as U+00E9 and as e with
    /// U+0301, "K" and the Kelvin sign); their records, in journals of format 1, replay by the bytes: a deletion of
    /// the other spelling's section came back as a deletion of nothing, under the same version. When a record of
    /// format 1 names an id its collection (or the record) holds spelled otherwise, every epoch is renewed, so that
    /// clients reload; ids of other texts, and records of format 2, keep them.
    @Test(arguments: [
        ("s-\u{E9}", "s-e\u{301}", UInt32(1), true), ("K", "\u{212A}", 1, true), ("\u{E9}", "\u{E8}", 1, false),
        ("s-\u{E9}", "s-e\u{301}", 2, false),
    ])
    func aVersion1RecordNamingAnIdSpelledOtherwiseRenewsTheEpochs(
        held: String, named: String, version: UInt32, renews: Bool
    ) throws {
        let records: [JournalRecord] = [
            .put(
                collection: "c", epoch: "epoch1", sections: [Section(id: held), Section(id: "t")], conditions: .none),
            .upsert(collection: "c", id: "i", data: .null, section: .id("t"), index: nil, conditions: .none),
            .ops(collection: "c", ops: [.deleteSections([.id(named)])], conditions: .none),
        ]
        let (registry, position, _) = try Self.recover(Self.journal(records, version: version).bytes)
        #expect(position.renewedEpochs == renews)
        let current = try #require(registry.entry("c")?.content.withLock { $0.version })
        #expect((current.epoch != "epoch1") == renews)
    }

    /// Two spellings of one id in one record of format 1 (an insertion those builds refused as a duplicate) renew
    /// the epochs too.
    @Test func aVersion1RecordWithTwoSpellingsOfAnIdRenewsTheEpochs() throws {
        let records: [JournalRecord] = [
            .put(collection: "c", epoch: "epoch1", sections: [Section(id: "s")], conditions: .none),
            .ops(
                collection: "c",
                ops: [
                    .insertItems(
                        at: ItemPosition(section: .id("s"), index: 0),
                        items: [Item(id: "p-\u{E9}"), Item(id: "p-e\u{301}")])
                ], conditions: .none),
        ]
        let (_, position, _) = try Self.recover(Self.journal(records, version: 1).bytes)
        #expect(position.renewedEpochs)
    }

    /// A view definition recorded before 2026-12-05 (kind 5) kept the view's version when only the definition
    /// changed; one recorded since (kind 7) commits a version. Each is replayed as it was applied, so that a
    /// journal written by the build before gives the same view versions its clients hold cursors for.
    @Test func aDefinitionRecordedBeforeKeepsTheVersionItWasAppliedAt() throws {
        func define(_ json: String, versioned: Bool) -> JournalRecord {
            .defineView(
                view: "v", epoch: "ve", definition: JSONData(canonical: json), conditions: .none,
                versionsEveryDefinition: versioned)
        }
        let old = define(#"{"source":"c","sortBy":[{"field":"/n","order":"asc"}]}"#, versioned: false)
        let new = define(#"{"source":"c","sortBy":[{"field":"/n","order":"desc"}]}"#, versioned: true)
        #expect(RecordCodec.encode(old).first == 5 && RecordCodec.encode(new).first == 7)
        for record in [old, new] { #expect(try RecordCodec.decode(RecordCodec.encode(record)) == record) }
        #expect(RecordCodec.isViewRecord(RecordCodec.encode(new)))
        #expect(RecordCodec.sequenceKey(of: RecordCodec.encode(new)) { _ in nil } == "c")

        let executor = Executor(registry: Registry(), limits: HistoryLimits())
        _ = executor.execute(Self.records[0])
        _ = executor.execute(define(#"{"source":"c"}"#, versioned: true))
        func version() -> String? { executor.views.entry("v")?.live.withLock { $0.version.description } }
        #expect(version() == "ve.1")
        _ = executor.execute(old)
        #expect(version() == "ve.1", "a definition recorded before kept the version")
        _ = executor.execute(new)
        #expect(version() == "ve.2", "a definition recorded now commits one")
        _ = executor.execute(new)
        #expect(version() == "ve.2", "the same definition again commits nothing")
    }

    /// The view definitions a replay applies count the items of their sources as they stand then: a start that
    /// spent long on them compacts the journal at once (`Snapshots.compactAfterStart`), however small it is.
    @Test func replayedDefinitionsCountTheItemsOfTheirSources() throws {
        func define(_ view: String, source: String) -> JournalRecord {
            .defineView(
                view: view, epoch: "v\(view)", definition: JSONData(canonical: #"{"source":"\#(source)"}"#),
                conditions: .none, versionsEveryDefinition: true)
        }
        // 2 items, then 3 once `z` is in; a view of a missing collection reads nothing.
        let records =
            [Self.records[0], Self.records[1], define("v1", source: "c"), Self.records[2]]
            + [define("v2", source: "c"), define("v3", source: "missing")]
        let (registry, position, _) = try Self.recover(Self.journal(records).bytes)
        #expect(Self.items(registry).count == 3)
        #expect(position.definitionItems == 2 + 3)
    }

    /// A start whose replayed definitions read `Snapshots.definitionsWorthASnapshot` source items writes a snapshot
    /// at once, far below `--snapshot-bytes`: so that the next start restores those views from it.
    @Test func aStartThatReplayedManyDefinitionsCompactsAtOnce() throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory.open(path)
        let logger = Logger(level: .critical)
        let journal = try FileJournal(
            directory: directory, segment: 1, size: 0, bytesSinceSnapshot: 0, policy: .always, metrics: Metrics(),
            logger: logger)
        defer { journal.close() }
        let registry = Registry()
        _ = registry.insert(
            CollectionEntry(name: "c", content: try VersionedCollection(epoch: "e", sections: [Section(id: "s")])))
        let snapshots = Snapshots(
            directory: directory, journal: journal, registry: registry, views: ViewRegistry(), lanes: Lanes(),
            threshold: 64 << 20, logger: logger)
        snapshots.compactAfterStart(definitionItems: Snapshots.definitionsWorthASnapshot)
        #expect(waitUntil(timeout: 10) { FileManager.default.fileExists(atPath: directory.snapshotPath) })
    }

    /// An upsert naming section `"default"` in a collection with no section was refused (`409`) until 2026-12-06,
    /// where leaving `section` out created the section; now both create it. A journal of a build before holds
    /// such a refused upsert as kind 3, and replaying it must refuse it again: its writer was told `409`, and a
    /// client at the next version would be told to insert another item twice.
    @Test func anUpsertNamingDefaultRecordedBeforeIsRefusedAgain() throws {
        func upsert(_ id: String, refuses: Bool) -> JournalRecord {
            .upsert(
                collection: "c", id: id, data: .null, section: .id("default"), index: nil, conditions: .none,
                refusesMissingDefault: refuses)
        }
        let old = upsert("old", refuses: true)
        let new = upsert("new", refuses: false)
        #expect(RecordCodec.encode(old).first == 3 && RecordCodec.encode(new).first == 8)
        for record in [old, new] { #expect(try RecordCodec.decode(RecordCodec.encode(record)) == record) }
        let other = JournalRecord.upsert(
            collection: "c", id: "i", data: .null, section: .id("s"), index: nil, conditions: .none)
        #expect(RecordCodec.encode(other).first == 3, "only upserts naming default need the new kind")
        #expect(try RecordCodec.decode(RecordCodec.encode(other)) == other)
        var mislabelled = RecordCodec.encode(other)
        mislabelled[0] = 8
        #expect(throws: BinaryReader.Malformed.self) { try RecordCodec.decode(mislabelled) }

        let empty = JournalRecord.put(collection: "c", epoch: "epoch1", sections: [], conditions: .none)
        let (registry, _, _) = try Self.recover(Self.journal([empty, old, new, upsert("again", refuses: true)]).bytes)
        #expect(Self.items(registry) == ["new", "again"], "the old record is refused while no section exists")
        #expect(registry.entry("c")?.content.withLock { $0.version.description } == "epoch1.3")
    }

    @Test func wholeJournalReplays() throws {
        let (registry, position, _) = try Self.recover(Self.journal(Self.records).bytes)
        #expect(Self.items(registry) == ["z", "a", "b"])
        #expect(registry.entry("c")?.content.withLock { $0.version.description } == "epoch1.3")
        #expect(position.segment == 1)
        #expect(position.size == Self.journal(Self.records).bytes.count)
    }

    @Test func tornTailAtEveryByteOfTheLastRecordIsCut() throws {
        let (bytes, lastFrame) = Self.journal(Self.records)
        for cut in lastFrame..<bytes.count {
            let (registry, position, after) = try Self.recover(Array(bytes[..<cut]))
            #expect(Self.items(registry) == ["a", "b"], "cut at \(cut)")
            #expect(position.size == lastFrame, "cut at \(cut)")
            #expect(after.count == lastFrame, "cut at \(cut)")
        }
    }

    @Test func flippedBitsInTheLastRecordAreCut() throws {
        let (bytes, lastFrame) = Self.journal(Self.records)
        for offset in lastFrame..<bytes.count {
            for bit in [0, 3, 7] {
                var damaged = bytes
                damaged[offset] ^= UInt8(1 << bit)
                let (registry, _, after) = try Self.recover(damaged)
                #expect(Self.items(registry) == ["a", "b"], "bit \(bit) of byte \(offset)")
                #expect(after.count == lastFrame)
            }
        }
    }

    /// A flipped byte in the middle record, with the last one after it (and, from version 2 on, the sync mark
    /// that says the middle one was on disk when the last was written).
    @Test(arguments: JournalFormat.versions)
    func corruptRecordInTheMiddleStopsRecovery(version: UInt32) throws {
        var (bytes, lastFrame) = Self.journal(Self.records, version: version)
        bytes[lastFrame - (version >= 2 ? JournalFormat.markFrameSize : 0) - 3] ^= 0x10
        #expect(throws: StartupError.self) { _ = try Self.recover(bytes) }
    }

    /// A client can put a whole well-formed frame inside an item's data; when the record holding it is torn,
    /// the copy must not pass for a later record (which would make recovery refuse to start).
    @Test func framesInsideAPayloadDoNotCount() throws {
        let embedded = JournalFormat.frame(RecordCodec.encode(Self.records[1]), at: 0)
        let record = JournalRecord.upsert(
            collection: "c", id: "x", data: JSONData(canonical: embedded + [UInt8](repeating: 0x20, count: 64)),
            section: nil, index: nil, conditions: .none)
        let (bytes, lastFrame) = Self.journal(Array(Self.records.prefix(2)) + [record])
        let (registry, position, _) = try Self.recover(Array(bytes[..<(bytes.count - 3)]))
        #expect(Self.items(registry) == ["a", "b"])
        #expect(position.size == lastFrame)
    }

    /// Files of a newer format, left by a later build an operator rolled back from, are refused as that, not as
    /// corrupt: a snapshot called corrupt invites its deletion, and the journal before it is gone.
    @Test func filesOfANewerFormatAreRefusedAsSuch() throws {
        var (bytes, _) = Self.journal(Self.records)
        bytes[8] = UInt8(JournalFormat.versions.upperBound + 1)
        let journalError = #expect(throws: StartupError.self) { _ = try Self.recover(bytes) }
        #expect(journalError?.description.contains("written by a newer ChangeServer (journal format 3") == true)

        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory.open(path)
        var snapshot = SnapshotFile.encode(nextSegment: 1, collections: [], views: [])
        snapshot[8] = UInt8(SnapshotFile.version + 1)
        snapshot.removeLast(4)
        var checksum = CRC32C.checksum(snapshot)
        snapshot += withUnsafeBytes(of: &checksum) { Array($0) }
        try #require(FileManager.default.createFile(atPath: directory.snapshotPath, contents: Data(snapshot)))
        let run = {
            _ = try Recovery.run(
                directory, executor: Executor(registry: Registry(), limits: HistoryLimits()),
                logger: Logger(level: .critical))
        }
        let newer = #expect(throws: StartupError.self) { try run() }
        #expect(newer?.description.contains("written by a newer ChangeServer (snapshot format 3") == true)
        #expect(newer?.description.contains("keep the file") == true)
        // The same bytes with a bad checksum are corrupt, whatever their format says.
        snapshot[snapshot.count - 1] ^= 0xFF
        try #require(FileManager.default.createFile(atPath: directory.snapshotPath, contents: Data(snapshot)))
        let corrupt = #expect(throws: StartupError.self) { try run() }
        #expect(corrupt?.description.contains("is corrupt") == true)
    }

    @Test func foreignFileStopsRecovery() throws {
        var (bytes, _) = Self.journal(Self.records)
        bytes[0] = UInt8(ascii: "X")
        #expect(throws: StartupError.self) { _ = try Self.recover(bytes) }
    }

    /// The journal's first segment cut inside its header (or emptied) without a snapshot before it: what it held
    /// is gone, and recovery refuses rather than start an empty store (it did, with a warning). This build never
    /// leaves such a segment: it makes one whole, then names it.
    @Test(arguments: [0, 1, 10, JournalFormat.headerSize - 1])
    func aFirstSegmentCutInsideItsHeaderStopsRecovery(bytes: Int) throws {
        #expect {
            _ = try Self.recover(Array(JournalFormat.header.prefix(bytes)))
        } throws: { error in
            "\(error)".contains("ends inside its header (\(bytes) byte\(bytes == 1 ? "" : "s")): it was cut short")
        }
    }

    /// A segment is made under another name and renamed whole into place; a leftover of one being made (a crash
    /// before its rename) is removed when the directory is opened, and never read as a segment.
    @Test func aSegmentIsNamedOnlyOnceWhole() throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let leftover = try DataDirectory.open(path).temporarySegmentPath(1)
        #expect(FileManager.default.createFile(atPath: leftover, contents: Data([1, 2, 3])))
        let reopened = try DataDirectory.open(path)
        #expect(!FileManager.default.fileExists(atPath: leftover))
        _ = try FileJournal(
            directory: reopened, segment: 1, size: 0, bytesSinceSnapshot: 0, policy: .never, metrics: Metrics(),
            logger: Logger(level: .critical))
        #expect(readWholeFile(reopened.segmentPath(1)) == JournalFormat.header)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: path).sorted() == [
                "LOCK", "journal-00000000000000000001.log", "journal-head", "last-run",
            ])
    }

    /// A leftover that holds more than a header was renamed and written, its rename lost (the directory's sync
    /// failed, then a crash): it may hold acknowledged records, so the start is refused and the file kept.
    @Test func aLeftoverThatHoldsRecordsStopsTheStart() throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let leftover = try DataDirectory.open(path).temporarySegmentPath(2)
        let (journal, _) = Self.journal(Self.records)
        #expect(FileManager.default.createFile(atPath: leftover, contents: Data(journal)))
        #expect {
            _ = try DataDirectory.open(path)
        } throws: { error in
            "\(error)".contains("holds more than a segment's header")
        }
        #expect(readWholeFile(leftover) == journal)
    }

    /// Every segment after a snapshot deleted: the snapshot's own segment, made before it was written, is missing,
    /// and recovery refuses to start without the mutations that followed (it started silently from the snapshot).
    /// An empty file in its place is the operator's way to start from the snapshot alone.
    @Test func aMissingSegmentAfterTheSnapshotStopsRecovery() throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory.open(path)
        let content = try VersionedCollection(epoch: "e", sections: [Section(id: "s", items: [Item(id: "a")])])
        let snapshot = SnapshotFile.encode(nextSegment: 3, collections: [("c", content)], views: [])
        #expect(SnapshotFile.write(snapshot, in: directory) == nil)
        func recover() throws -> Registry {
            let registry = Registry()
            _ = try Recovery.run(
                directory, executor: Executor(registry: registry, limits: HistoryLimits()),
                logger: Logger(level: .critical))
            return registry
        }
        #expect {
            _ = try recover()
        } throws: { error in
            "\(error)".contains("journal segment 3 is missing")
        }
        #expect(FileManager.default.createFile(atPath: directory.segmentPath(3), contents: Data()))
        #expect(Self.items(try recover()) == ["a"])
        // Cut inside its header rather than emptied, it is damage, not that way.
        #expect(FileManager.default.createFile(atPath: directory.segmentPath(3), contents: Data([0x43, 0x53])))
        #expect {
            _ = try recover()
        } throws: { error in
            "\(error)".contains("ends inside its header (2 bytes)")
        }
    }

    /// A snapshot or segment that is there but cannot be read stops recovery with the reason: a snapshot with the
    /// wrong owner was reported as missing ("no snapshot covering the ones before"), which invites the wrong
    /// repair. A directory in the file's place, a link to nothing and a FIFO (whose opening waited for a writer:
    /// the start hung) are what even root cannot read.
    @Test func anUnreadableSnapshotOrSegmentIsReportedWithItsReason() throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory.open(path)
        func recover() throws {
            _ = try Recovery.run(
                directory, executor: Executor(registry: Registry(), limits: HistoryLimits()),
                logger: Logger(level: .critical))
        }
        try FileManager.default.createDirectory(atPath: directory.snapshotPath, withIntermediateDirectories: false)
        try #require(FileManager.default.createFile(atPath: directory.segmentPath(2), contents: Data()))
        #expect {
            try recover()
        } throws: { error in
            "\(error)" == "cannot read the snapshot \(directory.snapshotPath): it is not a regular file"
        }
        try FileManager.default.removeItem(atPath: directory.snapshotPath)
        try FileManager.default.createSymbolicLink(atPath: directory.snapshotPath, withDestinationPath: path + "/gone")
        #expect {
            try recover()
        } throws: { error in
            "\(error)" == "cannot read the snapshot \(directory.snapshotPath): it is a symbolic link to nothing"
        }
        try FileManager.default.removeItem(atPath: directory.snapshotPath)
        try #require(mkfifo(directory.snapshotPath, 0o644) == 0)
        #expect {
            try recover()
        } throws: { error in
            "\(error)" == "cannot read the snapshot \(directory.snapshotPath): it is not a regular file"
        }
        try FileManager.default.removeItem(atPath: directory.snapshotPath)
        try FileManager.default.removeItem(atPath: directory.segmentPath(2))
        try FileManager.default.createDirectory(atPath: directory.segmentPath(1), withIntermediateDirectories: false)
        #expect {
            try recover()
        } throws: { error in
            "\(error)" == "cannot read the journal \(directory.segmentPath(1)): it is not a regular file"
        }
    }

    @Test func snapshotKeepsContentVersionAndHistory() throws {
        var content = try VersionedCollection(epoch: "e", sections: [Section(id: "s", items: [Item(id: "a")])])
        _ = try content.apply([.insertItems(at: ItemPosition(section: .index(0), index: 0), items: [Item(id: "b")])])
        _ = try content.apply([.moveItem(.id("a"), to: ItemPosition(section: .index(0), index: 0))])
        _ = try content.apply([.updateItems([Item(id: "b", data: JSONData(canonical: "2"))])])
        let bytes = SnapshotFile.encode(nextSegment: 7, collections: [("c", content)], views: [])
        let decoded = try SnapshotFile.decode(bytes, limits: HistoryLimits())
        #expect(decoded.nextSegment == 7)
        let restored = try #require(decoded.collections.first?.content)
        #expect(restored.version == content.version)
        #expect(restored.snapshot() == content.snapshot())
        for seq in 0...content.version.seq {
            let since = Version(epoch: "e", seq: seq)
            #expect(restored.changes(since: since) == content.changes(since: since), "since \(since)")
        }
        var damaged = bytes
        damaged[bytes.count / 2] ^= 1
        #expect(throws: BinaryReader.Malformed.self) { try SnapshotFile.decode(damaged, limits: HistoryLimits()) }
    }
}
