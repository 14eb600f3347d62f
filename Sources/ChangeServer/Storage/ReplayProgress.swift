/// Lines a long replay writes while it runs, every `interval` milliseconds: the server listens only once recovery
/// is done, and a start that replayed a journal of 1.4 GB for 23 s (43 s at half a CPU) said nothing meanwhile, so
/// that an operator could not tell it from a hang.
struct ReplayProgress {
    let started: Int64
    let segments: Int
    let interval: Int64
    /// Where a line goes: the log at `notice`.
    let report: (String) -> Void
    /// The segment being replayed, from 0.
    var segment = 0
    private var records = 0
    private var nextLine: Int64
    /// Where in its segment the clock was last read.
    private var lookedAt = 0

    init(started: Int64, segments: Int, interval: Int64 = 5000, report: @escaping (String) -> Void) {
        self.started = started
        self.segments = segments
        self.interval = interval
        self.report = report
        nextLine = started + interval
    }

    /// A record was replayed; `offset` of `size` bytes of its segment are behind it. The clock is read once every
    /// 4,096 records, or 16 MiB (a journal of large replacements has a few hundred records per GB).
    mutating func replayed(at offset: Int, of size: Int) {
        records += 1
        guard records & 4095 == 0 || offset - lookedAt >= 16 << 20 || offset < lookedAt else { return }
        lookedAt = offset
        let now = MonotonicClock.now()
        guard now >= nextLine else { return }
        nextLine = now + interval
        let percent = size > 0 ? offset * 100 / size : 100
        report(
            "replaying the journal: segment \(segment + 1) of \(segments) (\(percent)% read), \(records) records in "
                + "\((now - started) / 1000) s so far; the server listens once it is done")
    }
}
