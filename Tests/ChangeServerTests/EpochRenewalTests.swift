import Foundation
import Model
import ProcessSupport
import Testing

@testable import ChangeServer

/// When recovery gives every collection new epochs (`EpochRenewal`), in-process on journal files written byte by
/// byte; `LiveDurabilityTests+EpochRenewal` does it to the real server.
@Suite struct EpochRenewalTests {
    /// Recovers a directory holding `bytes` as segment 1, after `prepare` ran on it.
    static func recover(_ bytes: [UInt8], prepare: (DataDirectory) throws -> Void = { _ in }) throws -> (
        epoch: String?, items: [String], position: Recovery.Position, note: String?
    ) {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory.open(path)
        try #require(FileManager.default.createFile(atPath: directory.segmentPath(1), contents: Data(bytes)))
        try prepare(directory)
        let registry = Registry()
        let position = try Recovery.run(
            directory, executor: Executor(registry: registry, limits: HistoryLimits()), logger: Logger(level: .critical)
        )
        let version = registry.entry("c")?.content.withLock { $0.version }
        #expect(version?.seq == (position.renewedEpochs ? 1 : 3))
        return (version?.epoch, RecoveryTests.items(registry), position, EpochRenewal.pendingReason(directory))
    }

    @Test func aWholeJournalKeepsItsEpochs() throws {
        let (bytes, _) = RecoveryTests.journal(RecoveryTests.records)
        let recovered = try Self.recover(bytes)
        #expect(recovered.epoch == "epoch1" && !recovered.position.renewedEpochs && recovered.note == nil)
    }

    /// A cut tail may have held answered records: new epochs, the content as replayed, and a note that stays
    /// until a snapshot holds them.
    @Test func aCutTailRenewsEveryEpoch() throws {
        let (bytes, _) = RecoveryTests.journal(RecoveryTests.records)
        let recovered = try Self.recover(bytes + [0xAB, 0xCD, 0xEF, 0x01, 0x23])
        #expect(recovered.epoch != "epoch1" && recovered.position.renewedEpochs)
        #expect(recovered.items == ["z", "a", "b"])
        #expect(recovered.note?.contains("the journal's tail was cut at byte \(bytes.count)") == true)
    }

    /// A start that stopped before the snapshot left the note: this one renews again.
    @Test func aNoteLeftByAnEarlierStartRenewsAgain() throws {
        let (bytes, _) = RecoveryTests.journal(RecoveryTests.records)
        let recovered = try Self.recover(bytes) { directory in
            _ = try EpochRenewal.mark(directory, reason: "an earlier start's reason", logger: Logger(level: .critical))
        }
        #expect(recovered.epoch != "epoch1" && recovered.position.renewedEpochs)
        #expect(recovered.note == "an earlier start's reason")
    }

    /// `last-run` says the boot, the policy and the state of the run before: only a run that could lose
    /// acknowledged writes (`interval`, `never`), still `running` (it stopped without closing its journal), on
    /// another boot, renews. The journal's own last bytes do not count: after a power loss its file may go back to
    /// an older clean stop.
    @Test(arguments: [
        ("another-boot interval running", true), ("another-boot never running", true),
        ("another-boot always running", false), ("this-boot interval running", false),
        ("another-boot interval closed", false),
        // A record torn by a crash says nothing: the start cannot know, and renews.
        ("garbage", true),
    ])
    func aMachineRestartAfterAnUncleanRunThatCouldLoseWritesRenews(lastRun: String, renews: Bool) throws {
        var (bytes, _) = RecoveryTests.journal(RecoveryTests.records)
        // Closed with a mark, as a clean stop leaves it: a power loss can bring an older clean stop back.
        bytes += JournalFormat.frame(JournalFormat.mark(synced: bytes.count), at: bytes.count)
        let line = lastRun.replacingOccurrences(of: "this-boot", with: EpochRenewal.bootID() ?? "none")
        let recovered = try Self.recover(bytes) { directory in
            try line.write(toFile: RunRecord.path(directory), atomically: true, encoding: .utf8)
        }
        #expect(recovered.position.renewedEpochs == renews)
        #expect((recovered.epoch != "epoch1") == renews)
    }

    /// The record is a line of fixed length, rewritten in place (no new block: a full disk takes it).
    @Test func theRunRecordIsRewrittenInPlace() throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory.open(path)
        let logger = Logger(level: .critical)
        RunRecord.write(directory, policy: .interval, closed: false, logger: logger)
        let boot = EpochRenewal.bootID() ?? "unknown"
        #expect(RunRecord.read(directory) == RunRecord(boot: boot, policy: .interval, closed: false))
        let before = try FileManager.default.attributesOfItem(atPath: RunRecord.path(directory))
        RunRecord.write(directory, policy: .interval, closed: true, logger: logger)
        let after = try FileManager.default.attributesOfItem(atPath: RunRecord.path(directory))
        #expect(RunRecord.read(directory) == RunRecord(boot: boot, policy: .interval, closed: true))
        #expect(after[.systemFileNumber] as? Int == before[.systemFileNumber] as? Int)
        #expect(after[.size] as? Int == RunRecord.lineLength)
    }

    @Test func theBootIDIsRead() {
        #expect(EpochRenewal.bootID()?.count == 36)
    }
}
