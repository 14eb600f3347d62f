import Foundation
import Model
import ProcessSupport
import Synchronization
import Testing

@testable import ChangeServer

/// With `--fsync always` the syncer writes zeros ahead of the records (`JournalFormat.preallocation`), so that a
/// sync writes data alone; recovery reads such zeros as the segment's end, whole, and nothing else as one.
@Suite struct JournalPreallocationTests {
    static let zeros = [UInt8](repeating: 0, count: JournalFormat.preallocation)

    @Test func zerosAfterTheLastRecordEndTheSegmentWhole() throws {
        let (bytes, _) = RecoveryTests.journal(RecoveryTests.records)
        let (registry, position, after) = try RecoveryTests.recover(bytes + Self.zeros)
        #expect(RecoveryTests.items(registry) == ["z", "a", "b"])
        #expect(position.size == bytes.count)
        #expect(after.count == bytes.count + Self.zeros.count, "the zeros are kept for the next records")
    }

    @Test func zerosAfterTheRecordsOfAnOlderSegmentEndIt() throws {
        let (first, _) = RecoveryTests.journal(RecoveryTests.records)
        let (second, _) = RecoveryTests.journal([
            .upsert(collection: "c", id: "y", data: .null, section: nil, index: nil, conditions: .none)
        ])
        let recovered = try RecoveryScaleTests.recover([first + Self.zeros, second])
        #expect(RecoveryTests.items(recovered.registry) == ["z", "a", "b", "y"])
        #expect(recovered.position.segment == 2)
        #expect(recovered.position.size == second.count)
    }

    /// A record torn by a crash, with the zeros after it: the record is cut as any torn tail, zeros and all (at
    /// every byte but those whose missing rest is zeros: that record is whole).
    @Test func aTornRecordBeforeTheZerosIsCut() throws {
        let (bytes, lastFrame) = RecoveryTests.journal(RecoveryTests.records)
        for cut in lastFrame + 1..<bytes.count where !bytes[cut...].allSatisfy({ $0 == 0 }) {
            let (registry, position, after) = try RecoveryTests.recover(Array(bytes[..<cut]) + Self.zeros)
            #expect(RecoveryTests.items(registry) == ["a", "b"], "cut at \(cut)")
            #expect(position.size == lastFrame, "cut at \(cut)")
            #expect(after.count == lastFrame, "cut at \(cut)")
        }
    }

    /// Zeros in the middle of a segment, valid records after them: not an end but a hole, and refused.
    @Test func zerosFollowedByRecordsAreNotAnEnd() throws {
        let (bytes, lastFrame) = RecoveryTests.journal(RecoveryTests.records)
        var holed = bytes
        holed.replaceSubrange(
            JournalFormat.headerSize..<lastFrame,
            with: [UInt8](repeating: 0, count: lastFrame - JournalFormat.headerSize))
        #expect(throws: StartupError.self) { _ = try RecoveryTests.recover(holed) }
    }

    /// The journal itself: what it syncs leaves zeros ahead of the last record, a restart goes on right after the
    /// last record (not after the zeros), and a second restart finds every record of both runs.
    @Test func aJournalReopenedOverItsZerosGoesOnAfterItsLastRecord() throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory.open(path)
        let durable = Atomic<Int>(0)
        func append(_ records: [JournalRecord], at position: Recovery.Position) throws {
            let journal = try FileJournal(
                directory: directory, segment: position.segment, size: position.size,
                bytesSinceSnapshot: position.bytesSinceSnapshot, policy: .always, metrics: Metrics(),
                logger: Logger(level: .critical))
            for record in records {
                try journal.append(RecordCodec.encode(record)) { done in
                    if done { durable.add(1, ordering: .relaxed) }
                }
            }
            journal.close()
        }
        func recover() throws -> (Registry, Recovery.Position) {
            let registry = Registry()
            let position = try Recovery.run(
                directory, executor: Executor(registry: registry, limits: HistoryLimits()),
                logger: Logger(level: .critical))
            return (registry, position)
        }

        try append(RecoveryTests.records, at: Recovery.Position(segment: 1, size: 0))
        #expect(durable.load(ordering: .relaxed) == RecoveryTests.records.count)
        let written = readWholeFile(directory.segmentPath(1)) ?? []
        let (logical, _) = RecoveryTests.journal(RecoveryTests.records)
        #expect(written.count >= logical.count + JournalFormat.preallocation)
        #expect(Array(written.prefix(logical.count)) == logical)
        #expect(written.dropFirst(logical.count).allSatisfy { $0 == 0 })

        let (_, position) = try recover()
        #expect(position.size == logical.count)
        let later = JournalRecord.upsert(
            collection: "c", id: "y", data: .null, section: nil, index: nil, conditions: .none)
        try append([later], at: position)
        #expect(durable.load(ordering: .relaxed) == RecoveryTests.records.count + 1)
        let (registry, final) = try recover()
        #expect(RecoveryTests.items(registry) == ["z", "a", "b", "y"])
        #expect(final.size > logical.count)
        #expect(registry.entry("c")?.content.withLock { $0.version.description } == "epoch1.4")
    }
}
