import Testing

@testable import ChangeServer

/// A long replay says how far it is, at most once per interval.
@Suite struct ReplayProgressTests {
    @Test func aLineComesOncePerIntervalWithWhereTheReplayIs() {
        var lines: [String] = []
        var progress = ReplayProgress(started: MonotonicClock.now() - 3000, segments: 3, interval: 0) {
            lines.append($0)
        }
        progress.segment = 1
        for record in 1...8192 { progress.replayed(at: record * 100, of: 8192 * 200) }
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.last?.hasPrefix("replaying the journal: segment 2 of 3 (50% read), 8192 records in 3 s") == true)
        var quiet = ReplayProgress(started: MonotonicClock.now(), segments: 1) { lines.append($0) }
        for record in 1...8192 { quiet.replayed(at: record, of: 8192) }
        #expect(lines.count == 2, "a line before the first interval ended: \(lines)")
        // Records of 8 MB: the clock is read by the bytes, not only every 4,096 records.
        var large = ReplayProgress(started: MonotonicClock.now() - 1000, segments: 1, interval: 0) { lines.append($0) }
        for record in 1...4 { large.replayed(at: record * (8 << 20), of: 4 * (8 << 20)) }
        #expect(lines.count == 4, "\(lines)")
        #expect(lines.last?.contains("(100% read), 4 records") == true, "\(lines)")
    }
}
