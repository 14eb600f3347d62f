import Foundation
import Model
import ProcessSupport
import Testing

@testable import ChangeServer

/// Recovery past large tears in linear time, checked against the obvious quadratic scan; and the empty segment
/// that a rotation which did not complete leaves behind.
@Suite(.serialized) struct RecoveryScaleTests {
    /// Random bytes in which most 4-byte windows read as a small length, so that almost every offset is a
    /// candidate frame (the worst case for a scan): zeros, with a small byte every third position.
    static func candidateRich(_ count: Int, _ generator: inout SplitMix64) -> [UInt8] {
        (0..<count).map { index in index % 3 == 0 ? UInt8.random(in: 1...40, using: &generator) : 0 }
    }

    /// The answer of looking at every offset after `offset` in full: the oracle.
    static func scanFindsFrame(in bytes: [UInt8], after offset: Int) -> Bool {
        (offset + 1..<max(offset + 1, bytes.count)).contains { JournalFormat.payload(in: bytes, at: $0) != nil }
    }

    /// What recovery of segment files with these contents gives: the position, the registry, the time it took
    /// in seconds (CPU time of this thread, where recovery runs, all of it: other processes on the machine and
    /// the tests that run alongside do not count) and the segments left, with their sizes.
    static func recover(_ segments: [[UInt8]]) throws -> (
        position: Recovery.Position, registry: Registry, seconds: Double, left: [UInt64: Int]
    ) {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory.open(path)
        for (index, bytes) in segments.enumerated() {
            #expect(
                FileManager.default.createFile(atPath: directory.segmentPath(UInt64(index + 1)), contents: Data(bytes)))
        }
        let registry = Registry()
        let started = threadCPUSeconds()
        let position = try Recovery.run(
            directory, executor: Executor(registry: registry, limits: HistoryLimits()), logger: Logger(level: .critical)
        )
        let seconds = threadCPUSeconds() - started
        let left = try directory.segments().map { ($0, readWholeFile(directory.segmentPath($0))?.count ?? -1) }
        return (position, registry, seconds, Dictionary(uniqueKeysWithValues: left))
    }

    /// CPU seconds of one CRC32C pass over `bytes` (the median of 5): the unit the recovery tests measure in, so
    /// that a slower machine or a busier one moves both sides alike.
    static func checksumPassSeconds(_ bytes: [UInt8]) -> Double {
        let passes = (0..<5).map { _ in
            let started = threadCPUSeconds()
            _ = CRC32C.checksum(bytes)
            return threadCPUSeconds() - started
        }
        return passes.sorted()[2]
    }

    static func threadCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    @Test func spanChecksumsAreThoseOfCRC32C() {
        var generator = SplitMix64(seed: 14)
        let bytes = (0..<5000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes.withUnsafeBytes { raw in
            for base in [0, 1, 15, 16, 17, 999] {
                let spans = SpanChecksums(raw, from: base)
                for _ in 0..<300 {
                    let start = Int.random(in: base...raw.count, using: &generator)
                    let end = Int.random(in: start...raw.count, using: &generator)
                    let previous = UInt32.random(in: 0...UInt32.max, using: &generator)
                    let expected = CRC32C.checksum(
                        UnsafeRawBufferPointer(rebasing: raw[start..<end]), continuing: previous)
                    #expect(
                        spans.checksum(raw, start..<end, continuing: previous) == expected, "\(base) \(start)..<\(end)")
                }
            }
        }
    }

    @Test(arguments: [0, 1, 7, 65535, 65536, 65537, 3 << 16 | 5, 1 << 20])
    func shiftIsFeedingZeros(count: Int) {
        let zeros = [UInt8](repeating: 0, count: count)
        let tables = SpanChecksums(UnsafeRawBufferPointer(start: nil, count: 0), from: 0)
        for value: UInt32 in [0x8000_0000, 1, 0xDEAD_BEEF] {
            // The register fed `count` zero bytes, through the checksum: ~checksum(zeros, continuing: ~value).
            let shifted = tables.withTables { CRC32CAlgebra.shift(value, bytes: count, $0) }
            #expect(shifted == ~CRC32C.checksum(zeros, continuing: ~value))
        }
    }

    /// Random candidate-rich buffers, some with frames planted where they check out, some with frames planted
    /// one byte off (which must not count): the linear search answers as the full scan does, both ways.
    @Test func frameSearchAnswersAsAFullScan() {
        var generator = SplitMix64(seed: 6)
        var found = 0
        var notFound = 0
        for round in 0..<400 {
            var bytes = Self.candidateRich(Int.random(in: 60...600, using: &generator), &generator)
            let planted = round % 3
            for _ in 0..<planted {
                let payload = Self.candidateRich(Int.random(in: 1...40, using: &generator), &generator)
                let at = Int.random(
                    in: 0...(bytes.count - payload.count - JournalFormat.frameHeaderSize), using: &generator)
                let shifted = round % 2 == 0 ? at : at + 1
                let frame = JournalFormat.frame(payload, at: shifted)
                bytes.replaceSubrange(at..<at + frame.count, with: frame)
            }
            let offset = Int.random(in: 0..<bytes.count / 2, using: &generator)
            let expected = Self.scanFindsFrame(in: bytes, after: offset)
            #expect(JournalFormat.hasFrame(in: bytes, after: offset) == expected, "round \(round)")
            if expected { found += 1 } else { notFound += 1 }
        }
        #expect(found > 50)
        #expect(notFound > 50)
    }

    /// A 4 MB record (a collection of 200,000 small items, whose encoded lengths make a quarter of the offsets
    /// candidate frames) cut by a third: cut in the time of fewer than 100 checksum passes over the segment (15 to
    /// 25 measured on 2026-12-02, from 0.35 to 1.1 s of CPU in a debug build as the shared machine was busy; a
    /// scan that started over at each candidate would take about a million), the records before it kept.
    @Test(arguments: JournalFormat.versions)
    func tornMultiMegabyteRecordIsCutInLinearTime(version: UInt32) throws {
        let items = (0..<200_000).map { Item(id: "item\($0)", data: JSONData(canonical: Array("\($0 % 97)".utf8))) }
        let large = JournalRecord.put(
            collection: "big", epoch: "e", sections: [Section(id: "s", items: items)], conditions: .none)
        let (bytes, lastFrame) = RecoveryTests.journal(RecoveryTests.records + [large], version: version)
        #expect(bytes.count - lastFrame > 3_500_000)
        let torn = Array(bytes[..<(bytes.count - (bytes.count - lastFrame) / 3)])
        let (_, registry, seconds, left) = try Self.recover([torn])
        #expect(RecoveryTests.items(registry) == ["z", "a", "b"])
        #expect(registry.entry("big") == nil)
        #expect(left[1] == lastFrame)
        let pass = Self.checksumPassSeconds(torn)
        #expect(seconds < 100 * pass, "\(seconds) s, \(seconds / pass) checksum passes over the segment")
    }

    /// The worst bytes a tear can hold (a small length at two offsets out of three): a 3 MB record of them cut by
    /// a third, in linear time as well.
    @Test(arguments: JournalFormat.versions)
    func tornRecordOfAdversarialBytesIsCutInLinearTime(version: UInt32) throws {
        var generator = SplitMix64(seed: 12)
        let (head, _) = RecoveryTests.journal(RecoveryTests.records, version: version)
        let payload = Self.candidateRich(3 << 20, &generator)
        let frame = JournalFormat.frame(payload, at: head.count)
        let torn = head + frame.dropLast(frame.count / 3)
        let (_, registry, seconds, left) = try Self.recover([torn])
        #expect(RecoveryTests.items(registry) == ["z", "a", "b"])
        #expect(left[1] == head.count)
        let pass = Self.checksumPassSeconds(torn)
        #expect(seconds < 100 * pass, "\(seconds) s, \(seconds / pass) checksum passes over the segment")
    }

    /// The worst bytes for the search of a sync mark after a tear (version 2): a mark's payload length at every
    /// fourth offset, in a 3 MB record cut by a third; cut in linear time too.
    @Test func tornRecordOfMarkLengthsIsCutInLinearTime() throws {
        let (head, _) = RecoveryTests.journal(RecoveryTests.records)
        let payload = (0..<(3 << 20)).map { $0 % 4 == 0 ? UInt8(JournalFormat.markPayloadSize) : 0 }
        let frame = JournalFormat.frame(payload, at: head.count)
        let torn = head + frame.dropLast(frame.count / 3)
        let (_, registry, seconds, left) = try Self.recover([torn])
        #expect(RecoveryTests.items(registry) == ["z", "a", "b"])
        #expect(left[1] == head.count)
        let pass = Self.checksumPassSeconds(torn)
        #expect(seconds < 100 * pass, "\(seconds) s, \(seconds / pass) checksum passes over the segment")
    }

    /// A flipped byte early in a large segment is refused (valid records follow it, and from version 2 on the
    /// sync marks that say it was on disk), and at once: in the time of fewer than 20 checksum passes over the
    /// segment (1.4 to 1.5 measured, with writing the segment).
    @Test(arguments: JournalFormat.versions)
    func corruptRecordEarlyInALargeSegmentIsRefusedQuickly(version: UInt32) throws {
        let filler = (0..<4000).map { index in
            JournalRecord.upsert(
                collection: "c", id: "f\(index)", data: JSONData(canonical: Array(repeating: 0x31, count: 2000)),
                section: nil, index: nil, conditions: .none)
        }
        var (bytes, _) = RecoveryTests.journal(RecoveryTests.records + filler, version: version)
        #expect(bytes.count > 8_000_000)
        bytes[JournalFormat.headerSize + 40] ^= 0x04
        let started = Self.threadCPUSeconds()
        #expect(throws: StartupError.self) { _ = try Self.recover([bytes]) }
        let seconds = Self.threadCPUSeconds() - started
        let pass = Self.checksumPassSeconds(bytes)
        #expect(seconds < 20 * pass, "\(seconds) s, \(seconds / pass) checksum passes over the segment")
    }

    /// A corrupt record followed by one valid record of 300 kB (a length past the first table of powers), in
    /// the last segment of version 1 (no sync marks): the valid one is found, so recovery refuses; with that one
    /// torn too, both are cut.
    @Test func corruptRecordFollowedByALargeValidOneIsRefused() throws {
        let large = JournalRecord.upsert(
            collection: "c", id: "big", data: JSONData(canonical: Array(repeating: 0x32, count: 300_000)),
            section: nil, index: nil, conditions: .none)
        var (bytes, lastFrame) = RecoveryTests.journal(RecoveryTests.records + [large], version: 1)
        #expect(bytes.count - lastFrame > 1 << 16)
        let (_, corrupt) = RecoveryTests.journal(RecoveryTests.records, version: 1)
        bytes[corrupt + 12] ^= 0x01
        #expect(throws: StartupError.self) { _ = try Self.recover([bytes]) }
        let (position, registry, _, left) = try Self.recover([Array(bytes.dropLast())])
        #expect(RecoveryTests.items(registry) == ["a", "b"])
        // A segment of version 1 is cut, and the journal goes on in a new one.
        #expect(left == [1: corrupt])
        #expect(position.segment == 2 && position.size == 0)
    }

    /// Segment 1 ends with a torn record; segment 2, left by a rotation that did not complete, holds its header
    /// only: segment 2 goes, segment 1's tail is cut, and writing goes on there.
    @Test func emptyLeftoverSegmentAfterATornTail() throws {
        let (bytes, lastFrame) = RecoveryTests.journal(RecoveryTests.records)
        let (position, registry, _, left) = try Self.recover([
            Array(bytes[..<(bytes.count - 5)]), JournalFormat.header,
        ])
        #expect(RecoveryTests.items(registry) == ["a", "b"])
        #expect(position.segment == 1)
        #expect(position.size == lastFrame)
        #expect(left == [1: lastFrame])
    }

    /// A newest segment that holds less than its header was cut short since it was made (this build makes a
    /// segment whole before it is named), and the records it held are lost: the start is refused, where it was
    /// removed as "a rotation that did not complete" and the records after the last one read were dropped.
    @Test(arguments: [0, 7])
    func aNewestSegmentCutInsideItsHeaderStopsRecovery(headerBytes: Int) throws {
        let (bytes, _) = RecoveryTests.journal(RecoveryTests.records)
        #expect {
            _ = try Self.recover([bytes, Array(JournalFormat.header.prefix(headerBytes))])
        } throws: { error in
            "\(error)".contains("journal-00000000000000000002.log ends inside its header: it was cut short")
        }
    }

    /// With a record in segment 2, segment 1's bad tail (cut short: nothing valid after it in that segment) is
    /// refused, and the message says what happened and what to do.
    @Test func tornTailBeforeAWrittenSegmentIsRefused() throws {
        let (bytes, lastFrame) = RecoveryTests.journal(RecoveryTests.records)
        let (next, _) = RecoveryTests.journal([RecoveryTests.records[1]])
        #expect {
            _ = try Self.recover([Array(bytes[..<(bytes.count - 5)]), next])
        } throws: { error in
            "\(error)".contains("has a bad record at byte \(lastFrame) and nothing valid after it")
                && "\(error)".contains("cut short or damaged there") && "\(error)".contains("from a backup")
        }
    }

    /// A segment whose header cannot be written (here: the path it is made under leads to /dev/full) is not
    /// named: nothing is left of it.
    @Test func segmentWhoseHeaderCannotBeWrittenIsRemoved() throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = try DataDirectory.open(path)
        try FileManager.default.createSymbolicLink(
            atPath: directory.temporarySegmentPath(1), withDestinationPath: "/dev/full")
        #expect(throws: StartupError.self) {
            _ = try FileJournal(
                directory: directory, segment: 1, size: 0, bytesSinceSnapshot: 0, policy: .never, metrics: Metrics(),
                logger: Logger(level: .critical))
        }
        #expect(try directory.segments().isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: path) == ["LOCK"])
    }
}

/// The real server on a directory recovery has to repair.
@Suite(.tags(.liveServer)) struct LiveRecoveryScaleTests {
    /// The real server on such a directory (the leftover holds its header only, as a rotation of this build that
    /// did not complete leaves it) starts and serves what was acknowledged, under a new epoch (the tail cut may have
    /// been answered: `EpochRenewal`).
    @Test func serverStartsOnATornTailAndAnEmptyLeftoverSegment() throws {
        let path = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (bytes, _) = RecoveryTests.journal(RecoveryTests.records)
        let segment = { (number: Int) in path + "/journal-0000000000000000000\(number).log" }
        #expect(FileManager.default.createFile(atPath: segment(1), contents: Data(bytes.dropLast(5))))
        #expect(FileManager.default.createFile(atPath: segment(2), contents: Data(JournalFormat.header)))
        let server = try ServerProcess(dataDirectory: path)
        let snapshot = try server.client.get("/v1/collections/c")
        #expect(snapshot.status == 200)
        let version = try #require(snapshot.object["version"] as? String)
        #expect(!version.hasPrefix("epoch1.") && version.hasSuffix(".1"))
        let items = (snapshot.object["sections"] as? [[String: Any]])?.first?["items"] as? [[String: Any]]
        #expect(items?.compactMap { $0["id"] as? String } == ["a", "b"])
        #expect(server.log.contains("gets a new epoch"))
        #expect(server.stop() == 0)
    }
}
