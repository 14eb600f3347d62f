import Foundation
import Model
import ProcessSupport
import Synchronization
import Testing

@testable import ChangeServer

/// `journal-head`: the journal notes its newest segment, and a start that does not find it refuses.
@Suite struct JournalHeadTests {
    /// Recovers a directory holding `segments` (numbered from 1) and `journal-head` holding `head`.
    static func recover(_ segments: [[UInt8]], head: String?) throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory.open(path)
        for (index, bytes) in segments.enumerated() {
            try #require(
                FileManager.default.createFile(atPath: directory.segmentPath(UInt64(index + 1)), contents: Data(bytes)))
        }
        if let head { try head.write(toFile: JournalHead.path(directory), atomically: true, encoding: .utf8) }
        _ = try Recovery.run(
            directory, executor: Executor(registry: Registry(), limits: HistoryLimits()),
            logger: Logger(level: .critical))
    }

    static var closedSegment: [UInt8] {
        var (bytes, _) = RecoveryTests.journal(RecoveryTests.records)
        bytes += JournalFormat.frame(JournalFormat.mark(synced: bytes.count), at: bytes.count)
        return bytes
    }

    @Test func aStartThatFindsTheNewestSegmentGoesOn() throws {
        try Self.recover([Self.closedSegment, JournalFormat.header], head: "2\n")
        try Self.recover([Self.closedSegment], head: nil)
    }

    /// A newest segment that holds only its header (a rotation that did not complete) is removed, and the head
    /// goes back with it first: a start that stops before the journal opens finds no segment missing.
    @Test func anEmptyNewestSegmentRemovedTakesTheHeadBack() throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory.open(path)
        try #require(
            FileManager.default.createFile(atPath: directory.segmentPath(1), contents: Data(Self.closedSegment)))
        try #require(
            FileManager.default.createFile(atPath: directory.segmentPath(2), contents: Data(JournalFormat.header)))
        try "2\n".write(toFile: JournalHead.path(directory), atomically: true, encoding: .utf8)
        for _ in 0..<2 {
            _ = try Recovery.run(
                directory, executor: Executor(registry: Registry(), limits: HistoryLimits()),
                logger: Logger(level: .critical))
        }
        #expect(JournalHead.read(directory) == 1)
    }

    /// With every segment after a snapshot gone, the snapshot's own message (how to start from it alone) comes
    /// first.
    @Test func aSnapshotWithoutItsSegmentSaysHowToStartFromIt() throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory.open(path)
        let snapshot = SnapshotFile.encode(nextSegment: 3, collections: [], views: [])
        try #require(SnapshotFile.write(snapshot, in: directory) == nil)
        try "3\n".write(toFile: JournalHead.path(directory), atomically: true, encoding: .utf8)
        #expect {
            _ = try Recovery.run(
                directory, executor: Executor(registry: Registry(), limits: HistoryLimits()),
                logger: Logger(level: .critical))
        } throws: { error in
            "\(error)".contains("to start from the snapshot alone, create")
        }
    }

    /// Segment 1 closed with the mark of a journal that moved on, segment 2 gone: it read as a clean stop.
    @Test func aMissingNewestSegmentIsRefused() throws {
        #expect {
            try Self.recover([Self.closedSegment], head: "2\n")
        } throws: { error in
            "\(error)".contains("journal segment 2 is missing: the journal had moved on to it")
        }
        #expect(throws: StartupError.self) { try Self.recover([], head: "1\n") }
    }

    /// The journal notes its segment when it opens it, and the next one when it moves on.
    @Test func theJournalNotesItsNewestSegment() throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory.open(path)
        let journal = try FileJournal(
            directory: directory, segment: 1, size: 0, bytesSinceSnapshot: 0, policy: .never, metrics: Metrics(),
            logger: Logger(level: .critical))
        #expect(JournalHead.read(directory) == 1)
        try journal.append(RecordCodec.encode(RecoveryTests.records[0])) { _ in }
        let next = Mutex<UInt64?>(nil)
        journal.rotate { number in next.withLock { $0 = number } }
        #expect(next.withLock { $0 } == 2)
        #expect(JournalHead.read(directory) == 2)
        journal.close()
    }
}
