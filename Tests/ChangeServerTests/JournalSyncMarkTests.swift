import Dispatch
import Foundation
import Model
import ProcessSupport
import Synchronization
import Testing

@testable import ChangeServer

/// Journal format 2: sync marks and the zeros written ahead of the last record, as the real `FileJournal` writes
/// them and as recovery reads them, with a power loss during a sync over the zeros simulated by zeroing the
/// bytes a lost sector held.
@Suite struct JournalSyncMarkTests {
    static let records = RecoveryTests.records

    /// Bytes of a segment of version 2: the header, then each pass (a sync mark naming where it starts, then its
    /// records), then the mark that closes a segment when the journal moves on if `closed`, then `zeros` zeros;
    /// and where each record's frame starts.
    static func segment(passes: [[JournalRecord]], closed: Bool = false, zeros: Int = 0) -> (
        bytes: [UInt8], frames: [Int]
    ) {
        var bytes = JournalFormat.header
        var frames: [Int] = []
        for pass in passes {
            bytes += JournalFormat.frame(JournalFormat.mark(synced: bytes.count), at: bytes.count)
            for record in pass {
                frames.append(bytes.count)
                bytes += JournalFormat.frame(RecordCodec.encode(record), at: bytes.count)
            }
        }
        if closed { bytes += JournalFormat.frame(JournalFormat.mark(synced: bytes.count), at: bytes.count) }
        return (bytes + [UInt8](repeating: 0, count: zeros), frames)
    }

    /// `bytes` with `count` bytes at `offset` zeroed: a sector the disk did not write.
    static func lost(_ bytes: [UInt8], at offset: Int, count: Int = 8) -> [UInt8] {
        var bytes = bytes
        bytes.replaceSubrange(offset..<offset + count, with: [UInt8](repeating: 0, count: count))
        return bytes
    }

    /// The last pass lost an earlier sector and kept a later one (its last record is whole): nothing of that pass
    /// was acknowledged, so it is cut where the loss starts, on disk too; the pass before it stays. With version 1's
    /// rule (any whole frame after a bad one is damage) the server refused to start.
    @Test func aPassTornOutOfOrderIsCut() throws {
        let (bytes, frames) = Self.segment(
            passes: [[Self.records[0]], [Self.records[1], Self.records[2]]], zeros: 4096)
        let (registry, position, after) = try RecoveryTests.recover(Self.lost(bytes, at: frames[1]))
        #expect(RecoveryTests.items(registry) == ["a"])
        #expect(position.segment == 1 && position.size == frames[1])
        #expect(after.count == frames[1])
    }

    /// The same loss with a later pass's mark after it: the lost bytes were on disk when that pass was written.
    @Test func damageBeforeALaterMarkIsRefused() throws {
        let (bytes, frames) = Self.segment(passes: [[Self.records[0]], [Self.records[1]], [Self.records[2]]])
        #expect(throws: StartupError.self) { _ = try RecoveryTests.recover(Self.lost(bytes, at: frames[1])) }
        // The last pass alone torn the same way is cut.
        let (registry, position, _) = try RecoveryTests.recover(Self.lost(bytes, at: frames[2]))
        #expect(RecoveryTests.items(registry) == ["a", "b"])
        #expect(position.size == frames[2])
    }

    /// Zeros after the last record end a segment, the last one or not, and are kept for the next records.
    @Test func zerosWrittenAheadEndEverySegment() throws {
        let first = Self.segment(
            passes: [[Self.records[0]], [Self.records[1]]], closed: true, zeros: JournalFormat.preallocation)
        let second = Self.segment(passes: [[Self.records[2]]], zeros: JournalFormat.preallocation)
        let (position, registry, _, left) = try RecoveryScaleTests.recover([first.bytes, second.bytes])
        #expect(RecoveryTests.items(registry) == ["z", "a", "b"])
        #expect(position.segment == 2)
        #expect(position.size == second.bytes.count - JournalFormat.preallocation)
        #expect(left == [1: first.bytes.count, 2: second.bytes.count])
        // Anything but zeros after the last record of a segment that is not the last is damage.
        var damaged = first.bytes
        damaged[damaged.count - 100] = 1
        #expect(throws: StartupError.self) { _ = try RecoveryScaleTests.recover([damaged, second.bytes]) }
    }

    /// A segment before the last that lost its last pass (and its closing mark) reads as records followed by zeros:
    /// refused, since the records after it (here an upsert conditional on the lost one) were written on top of
    /// them. Without the closing mark the start went on with `a` alone.
    @Test func aSegmentBeforeTheLastMustEndWithItsClosingMark() throws {
        let first = Self.segment(
            passes: [[Self.records[0]], [Self.records[1]]], closed: true, zeros: JournalFormat.preallocation)
        let second = Self.segment(passes: [[Self.records[2]]])
        let passTwo = first.frames[1] - JournalFormat.markFrameSize
        let lost = Self.lost(
            first.bytes, at: passTwo, count: first.bytes.count - JournalFormat.preallocation - passTwo)
        #expect(throws: StartupError.self) { _ = try RecoveryScaleTests.recover([lost, second.bytes]) }
        let unclosed = Self.segment(passes: [[Self.records[0]], [Self.records[1]]], zeros: JournalFormat.preallocation)
        #expect(throws: StartupError.self) { _ = try RecoveryScaleTests.recover([unclosed.bytes, second.bytes]) }
    }

    /// A mark naming exactly the offset of a bad frame does not vouch for it: with `--fsync interval`, a record
    /// appended at the size the interval thread read before its sync is not covered by that sync, and the next
    /// record's mark names that size. Losing that record is cut, not refused.
    @Test func aMarkNamingTheBadFrameItselfIsNoProofOfDamage() throws {
        var bytes = JournalFormat.header
        bytes += JournalFormat.frame(RecordCodec.encode(Self.records[0]), at: bytes.count)
        let synced = bytes.count
        bytes += JournalFormat.frame(RecordCodec.encode(Self.records[1]), at: bytes.count)
        bytes += JournalFormat.frame(JournalFormat.mark(synced: synced), at: bytes.count)
        bytes += JournalFormat.frame(RecordCodec.encode(Self.records[2]), at: bytes.count)
        let (registry, position, _) = try RecoveryTests.recover(Self.lost(bytes, at: synced))
        #expect(RecoveryTests.items(registry) == ["a"])
        #expect(position.size == synced)
    }

    /// The journal moving on to a new segment closes the old one with a mark naming its end; the journal's byte
    /// count (what triggers a snapshot) covers the marks written.
    @Test(arguments: [Config.FsyncPolicy.always, .never])
    func aRotationClosesTheSegmentWithAMark(policy: Config.FsyncPolicy) throws {
        let (directory, journal) = try Self.newJournal(policy)
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        for record in Self.records.prefix(2) { try Self.append([record], to: journal) }
        let old = try #require(readWholeFile(directory.segmentPath(1)))
        let end =
            try #require(Self.frames(old).last).offset + JournalFormat.frameHeaderSize
            + (Self.frames(old).last?.payload.count ?? 0)
        #expect(journal.bytesSinceSnapshot == end - JournalFormat.headerSize)
        let rotated = DispatchSemaphore(value: 0)
        let next = Mutex<UInt64?>(nil)
        journal.rotate { number in
            next.withLock { $0 = number }
            rotated.signal()
        }
        #expect(rotated.wait(timeout: .now() + 10) == .success)
        #expect(next.withLock { $0 } == 2)
        try Self.append([Self.records[2]], to: journal)
        journal.close()
        let frames = Self.frames(try #require(readWholeFile(directory.segmentPath(1))))
        // The records' passes, then exactly one closing mark.
        #expect(frames.count == (policy == .always ? 5 : 3))
        #expect(frames.last.map { JournalFormat.synced(byMark: $0.payload) } == end)
        #expect(frames.last?.offset == end)
        let registry = Registry()
        _ = try Recovery.run(
            directory, executor: Executor(registry: registry, limits: HistoryLimits()), logger: Logger(level: .critical)
        )
        #expect(RecoveryTests.items(registry) == ["z", "a", "b"])
    }

    /// A segment of version 1 is read with its own rules and never written to again: the journal goes on in a new
    /// segment of the current version, and both replay at the next start.
    @Test func aVersion1JournalGoesOnInANewSegment() throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory.open(path)
        let (old, _) = RecoveryTests.journal(Array(Self.records.prefix(2)), version: 1)
        try #require(FileManager.default.createFile(atPath: directory.segmentPath(1), contents: Data(old)))
        let position = try Recovery.run(
            directory, executor: Executor(registry: Registry(), limits: HistoryLimits()),
            logger: Logger(level: .critical))
        #expect(position.segment == 2 && position.size == 0)
        let journal = try FileJournal(
            directory: directory, segment: position.segment, size: position.size,
            bytesSinceSnapshot: position.bytesSinceSnapshot, policy: .always, metrics: Metrics(),
            logger: Logger(level: .critical))
        try Self.append([Self.records[2]], to: journal)
        journal.close()
        #expect(readWholeFile(directory.segmentPath(1)) == old)
        #expect(JournalFormat.version(ofHeader: (readWholeFile(directory.segmentPath(2)) ?? [])[...]) == 2)
        let registry = Registry()
        _ = try Recovery.run(
            directory, executor: Executor(registry: registry, limits: HistoryLimits()), logger: Logger(level: .critical)
        )
        #expect(RecoveryTests.items(registry) == ["z", "a", "b"])
    }

    /// A new journal in a new temporary directory (the caller removes it).
    static func newJournal(_ policy: Config.FsyncPolicy, metrics: Metrics = Metrics()) throws -> (
        DataDirectory, FileJournal
    ) {
        let directory = try DataDirectory.open(try ServerProcess.temporaryDirectory())
        let journal = try FileJournal(
            directory: directory, segment: 1, size: 0, bytesSinceSnapshot: 0, policy: policy, metrics: metrics,
            logger: Logger(level: .critical))
        return (directory, journal)
    }

    /// Appends `records` at once and waits until each is called back, durable.
    static func append(_ records: [JournalRecord], to journal: FileJournal) throws {
        let done = DispatchSemaphore(value: 0)
        let failures = Mutex(0)
        for record in records {
            try journal.append(RecordCodec.encode(record)) { succeeded in
                if !succeeded { failures.withLock { $0 += 1 } }
                done.signal()
            }
        }
        for _ in records { #expect(done.wait(timeout: .now() + 10) == .success) }
        #expect(failures.withLock { $0 } == 0)
    }

    /// The frames of a segment file, in order, up to the first that is not whole: (offset, payload).
    static func frames(_ bytes: [UInt8]) -> [(offset: Int, payload: [UInt8])] {
        var frames: [(Int, [UInt8])] = []
        var offset = JournalFormat.headerSize
        while let (payload, end) = JournalFormat.payload(in: bytes, at: offset) {
            frames.append((offset, payload))
            offset = end
        }
        return frames
    }

    /// The real syncer (`--fsync always`): every pass starts with a mark naming where it starts, a clean stop
    /// ends the segment with one, the segment holds at least a chunk of zeros past the last record, and recovery
    /// reads it back whole. As if the machine had stopped before the last pass was synced (the closing mark
    /// gone): a loss in the last pass is cut there, a loss in an earlier one is refused.
    @Test func theSyncerMarksEachPassAndWritesZerosAhead() throws {
        let (directory, journal) = try Self.newJournal(.always)
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        for record in Self.records { try Self.append([record], to: journal) }
        journal.close()
        let bytes = try #require(readWholeFile(directory.segmentPath(1)))
        let frames = Self.frames(bytes)
        let marks = frames.filter { JournalFormat.synced(byMark: $0.payload) != nil }
        #expect(marks.count == Self.records.count + 1)
        for mark in marks { #expect(JournalFormat.synced(byMark: mark.payload) == mark.offset) }
        let closing = try #require(marks.last)
        #expect(closing.offset == frames.last?.offset)
        let recordFrames = frames.filter { JournalFormat.synced(byMark: $0.payload) == nil }
        #expect(try recordFrames.map { try RecordCodec.decode($0.payload) } == Self.records)
        let end = try #require(frames.last).offset + (frames.last?.payload.count ?? 0) + JournalFormat.frameHeaderSize
        #expect(bytes.count >= end + JournalFormat.preallocation / 2)
        #expect(bytes[end...].allSatisfy { $0 == 0 })

        let (whole, position, _) = try RecoveryTests.recover(bytes)
        #expect(RecoveryTests.items(whole) == ["z", "a", "b"])
        #expect(position.size == end)
        #expect(throws: StartupError.self) {
            _ = try RecoveryTests.recover(Self.lost(bytes, at: recordFrames[2].offset))
        }
        let unclosed = Self.lost(bytes, at: closing.offset, count: JournalFormat.markFrameSize)
        let (cut, _, after) = try RecoveryTests.recover(Self.lost(unclosed, at: recordFrames[2].offset))
        #expect(RecoveryTests.items(cut) == ["a", "b"])
        #expect(after.count == recordFrames[2].offset)
        #expect(throws: StartupError.self) {
            _ = try RecoveryTests.recover(Self.lost(unclosed, at: recordFrames[1].offset))
        }
    }

    /// A clean stop with any policy ends the segment with a mark, so that damage to the last records written is
    /// refused at the next start rather than cut as a torn write.
    @Test(arguments: [Config.FsyncPolicy.always, .interval, .never])
    func aCleanStopCertifiesTheLastRecords(policy: Config.FsyncPolicy) throws {
        let (directory, journal) = try Self.newJournal(policy)
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        try Self.append(Self.records, to: journal)
        journal.close()
        let bytes = try #require(readWholeFile(directory.segmentPath(1)))
        let frames = Self.frames(bytes)
        let last = try #require(frames.last)
        #expect(JournalFormat.synced(byMark: last.payload) == last.offset)
        let lastRecord = try #require(frames.last { JournalFormat.synced(byMark: $0.payload) == nil })
        #expect(throws: StartupError.self) { _ = try RecoveryTests.recover(Self.lost(bytes, at: lastRecord.offset)) }
    }

    /// After a restart, the first record written says that what recovery read is on disk (the journal synced it
    /// when it opened the segment).
    @Test(arguments: [Config.FsyncPolicy.always, .never])
    func theFirstRecordAfterARestartCertifiesWhatWasRecovered(policy: Config.FsyncPolicy) throws {
        let (directory, journal) = try Self.newJournal(policy)
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        try Self.append([Self.records[0]], to: journal)
        journal.close()
        // As if the process had stopped before `close` (its closing mark gone), then a start.
        let path = directory.segmentPath(1)
        let closed = try #require(readWholeFile(path))
        let closing = try #require(Self.frames(closed).last)
        #expect(JournalFormat.synced(byMark: closing.payload) == closing.offset)
        let crashed = Self.lost(closed, at: closing.offset, count: JournalFormat.markFrameSize)
        try #require(FileManager.default.createFile(atPath: path, contents: Data(crashed)))
        let position = try Recovery.run(
            directory, executor: Executor(registry: Registry(), limits: HistoryLimits()),
            logger: Logger(level: .critical))
        let again = try FileJournal(
            directory: directory, segment: position.segment, size: position.size,
            bytesSinceSnapshot: position.bytesSinceSnapshot, policy: policy, metrics: Metrics(),
            logger: Logger(level: .critical))
        try Self.append([Self.records[1]], to: again)
        again.close()
        let frames = Self.frames(try #require(readWholeFile(directory.segmentPath(1))))
        let first = try #require(frames.firstIndex { $0.offset == position.size })
        #expect(JournalFormat.synced(byMark: frames[first].payload) == position.size)
        #expect(frames.count > first + 1 && (try? RecordCodec.decode(frames[first + 1].payload)) == Self.records[1])
    }

    /// Without the syncer (`--fsync never` and `interval`), a sync (here `flush`) puts a mark naming what it synced
    /// before the next record: a loss before the mark is refused, one after it is cut.
    @Test func aFlushIsMarkedBeforeTheNextRecord() throws {
        let (directory, journal) = try Self.newJournal(.never)
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        try Self.append(Array(Self.records.prefix(2)), to: journal)
        journal.flush()
        try Self.append([Self.records[2]], to: journal)
        journal.close()
        let closed = try #require(readWholeFile(directory.segmentPath(1)))
        let closing = closed.count - JournalFormat.markFrameSize
        #expect(Self.frames(closed).last.map { JournalFormat.synced(byMark: $0.payload) } == closing)
        // As if the process had stopped before `close`.
        let bytes = Self.lost(closed, at: closing, count: JournalFormat.markFrameSize)
        let frames = Self.frames(bytes)
        try #require(frames.count == 4)
        #expect(JournalFormat.synced(byMark: frames[2].payload) == frames[2].offset)
        #expect(throws: StartupError.self) { _ = try RecoveryTests.recover(Self.lost(bytes, at: frames[1].offset)) }
        let (registry, position, _) = try RecoveryTests.recover(Self.lost(bytes, at: frames[3].offset))
        #expect(RecoveryTests.items(registry) == ["a", "b"])
        #expect(position.size == frames[3].offset)
    }

    /// `--fsync interval`: the interval thread's sync is marked before the next record as well.
    @Test func anIntervalSyncIsMarkedBeforeTheNextRecord() throws {
        let metrics = Metrics()
        let (directory, journal) = try Self.newJournal(.interval, metrics: metrics)
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        try Self.append([Self.records[0]], to: journal)
        let gauges = Metrics.Gauges(
            collections: 0, logLinesDropped: 0, bodyBytesInFlight: 0, responseBytesHeld: 0, diskFreeBytes: nil)
        let deadline = Date().addingTimeInterval(10)
        while !metrics.render(gauges).contains("changeserver_fsync_seconds_count 1"), Date() < deadline {
            usleep(5_000)
        }
        try Self.append([Self.records[1]], to: journal)
        journal.close()
        let frames = Self.frames(try #require(readWholeFile(directory.segmentPath(1))))
        try #require(frames.count == 4)
        #expect(JournalFormat.synced(byMark: frames[1].payload) == frames[1].offset)
    }
}
