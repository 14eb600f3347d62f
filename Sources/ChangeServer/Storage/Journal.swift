import Model

/// A committed change, as the journal records it: enough to replay it on the state before it.
enum JournalRecord: Sendable {
    /// The collection was created (at `<epoch>.1`) holding `sections`.
    case created(collection: String, epoch: String, sections: [Section])
    /// The whole content was replaced (PUT), giving `version`.
    case replaced(collection: String, version: Version, sections: [Section])
    /// Ops were applied, giving `version`.
    case applied(collection: String, version: Version, ops: [Op])
    /// The collection was deleted.
    case deleted(collection: String)
}

/// Where committed changes go before they are acknowledged. `append` returns once the record is as durable as
/// the configured `--fsync` policy promises, or throws `503 storage_unavailable`.
protocol Journal: Sendable {
    func append(_ record: JournalRecord) throws(HTTPError)
}

/// Keeps nothing: the server's state lives in memory only.
struct MemoryJournal: Journal {
    func append(_ record: JournalRecord) throws(HTTPError) {}
}
