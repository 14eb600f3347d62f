/// Why storage could not take a record: nothing of it was kept, and nothing was applied.
enum StorageError: Error, Sendable, Equatable {
    /// The write or the sync failed (a full disk, an I/O error): retrying later may succeed.
    case unavailable(reason: String)
    /// The encoded record is larger than one journal frame can hold (a body under `--max-body-bytes` whose
    /// canonical form is longer than it was written): it is refused before anything is written.
    case recordTooLarge(bytes: Int, limit: Int)
}

extension StorageError: CustomStringConvertible {
    /// As the log writes it: the reason on one line (libpq's messages span several, `DETAIL` and `HINT` indented
    /// with tabs), where the enum's own description showed them escaped inside `unavailable(reason: "…")`.
    var description: String {
        switch self {
        case .unavailable(let reason):
            String(
                reason.split(whereSeparator: \.isNewline).map { String($0).trimmingSpaces() }.joined(separator: " ")
                    .map { $0 == "\t" ? " " : $0 })
        case .recordTooLarge(let bytes, let limit):
            "a record of \(bytes) bytes, more than the journal's limit of \(limit)"
        }
    }
}
