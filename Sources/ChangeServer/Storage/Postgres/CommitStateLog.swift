/// What the log last said of whether PostgreSQL takes this server's transactions, so that a store whose commits fail
/// and succeed by turns (a disk with room for a trial's row but not for a batch) says so in at most two lines a minute
/// and the log never ends on a state the store has left: a change not said within its minute is owed, and said once
/// the minute is out, with how many times the store changed meanwhile. A single outage gets its two lines at once.
struct CommitStateLog {
    /// What to log.
    enum Line: Equatable {
        /// Commits fail, for `reason`; `changes`: the changes not said since the last line.
        case failing(reason: String, changes: Int)
        /// Commits are taken again.
        case takenAgain(changes: Int)
    }

    /// What the log says now.
    private(set) var saysFailing = false
    /// When the last two lines that said a change of state were said (monotonic milliseconds), the last one last:
    /// lines that give a failure's new reason do not count, or an outage whose reason changed twice said its end
    /// only once its minute was out (45 s after writes were taken again, in an operator's test).
    private var changesSaidAt: [Int64] = []
    /// When the last line was said.
    private var lastSaidAt: Int64?
    private var saidReason: String?
    /// The store's state as last looked at, and the reason of the last failure.
    private var failing = false
    private var latestReason = ""
    /// Changes of the state since the last line.
    private var changes = 0

    /// The line to log now that commits fail (`failing`, with the error of the failure, nil for a look without
    /// one) or are taken; nil to log nothing.
    mutating func line(failing: Bool, error: StorageError?, now: Int64) -> Line? {
        if let error { latestReason = "\(error)" }
        if failing != self.failing {
            changes += 1
            self.failing = failing
        }
        if failing == saysFailing {
            // Said already: another reason is news, at most every 10 s (a full disk's failures that name a table's
            // file and an index's by turns would say each), and so is the same one a minute after the last line.
            let since = lastSaidAt.map { now - $0 } ?? .max
            guard failing, error != nil, latestReason != saidReason && since >= 10_000 || since >= 60_000 else {
                return nil
            }
        } else {
            // A change: said unless two changes were said in the last minute.
            guard changesSaidAt.count < 2 || now - changesSaidAt[0] >= 60_000 else { return nil }
            changesSaidAt = Array((changesSaidAt + [now]).suffix(2))
        }
        // The changes before the one this line says.
        let unsaid = changes - (failing == saysFailing ? 0 : 1)
        saysFailing = failing
        lastSaidAt = now
        saidReason = failing ? latestReason : nil
        changes = 0
        return failing ? .failing(reason: latestReason, changes: unsaid) : .takenAgain(changes: unsaid)
    }

    /// Whether the log says something the store has left: a line is owed once the minute is out.
    func owes(failing: Bool) -> Bool { failing != saysFailing }
}
