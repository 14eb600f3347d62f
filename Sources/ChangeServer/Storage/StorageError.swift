/// Why storage could not take a record: nothing of it was kept, and nothing was applied.
enum StorageError: Error, Sendable, Equatable {
    /// The write or the sync failed (a full disk, an I/O error): retrying later may succeed.
    case unavailable(reason: String)
    /// The encoded record is larger than one journal frame can hold (a body under `--max-body-bytes` whose
    /// canonical form is longer than it was written): it is refused before anything is written.
    case recordTooLarge(bytes: Int, limit: Int)
}
