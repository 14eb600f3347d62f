import Glibc

/// `last-run`: the machine's boot id, the `--fsync` policy and the state (`running`, `closed`) of the last run on
/// this data directory. Written as `running` once the journal is open, before any write is taken, and as `closed`
/// once a stop has synced and closed the journal; so a start can tell that the run before it stopped without
/// closing its journal, and whether the machine restarted since (`EpochRenewal.lossSinceLastRun`), which the
/// journal's own last bytes cannot say after a power loss (its file may go back to an older clean stop).
struct RunRecord: Equatable {
    var boot: String
    var policy: Config.FsyncPolicy
    var closed: Bool

    static func path(_ directory: DataDirectory) -> String { directory.path + "/last-run" }

    /// The record of the last run; nil when there is none (a fresh directory, or one of a build before) or it
    /// cannot be read.
    static func read(_ directory: DataDirectory) -> RunRecord? {
        guard let bytes = readWholeFile(path(directory)) else { return nil }
        let fields = String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count == 3, let policy = Config.FsyncPolicy(rawValue: String(fields[1])),
            fields[2] == "running" || fields[2] == "closed"
        else { return nil }
        return RunRecord(boot: String(fields[0]), policy: policy, closed: fields[2] == "closed")
    }

    /// Writes the record for this run. Its line has a fixed length, so that it is rewritten in place, which needs
    /// no new block: a start on a full disk still says it runs. A failure is logged; the next start then reads an
    /// older record.
    static func write(_ directory: DataDirectory, policy: Config.FsyncPolicy, closed: Bool, logger: Logger) {
        let boot = EpochRenewal.bootID() ?? "unknown"
        let line = "\(boot) \(policy.rawValue) \(closed ? "closed" : "running")"
        if let failure = directory.writeLine(line, length: lineLength, to: path(directory)) {
            logger.warning(
                "cannot write \(path(directory)): \(failure); a crash of this run followed by a restart of the "
                    + "machine may go unnoticed at the next start")
        }
    }

    /// The length of every line written: a boot id (36 characters), a policy and a state fit with room to spare.
    static let lineLength = 80
}
