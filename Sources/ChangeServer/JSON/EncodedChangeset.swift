import Model

/// A changeset with its JSON, encoded once where it is made: the mutation's answer and every poll waiting at its
/// `from` version embed the same bytes. A class, immutable: it is handed along the write path (result, feeds,
/// answer) several times per write, and a copy of a struct of a changeset's nine arrays retained each of them.
final class EncodedChangeset: Sendable {
    let changeset: Changeset
    let json: [UInt8]

    init(_ changeset: Changeset) {
        self.changeset = changeset
        var writer = JSONWriter()
        writer.changeset(changeset)
        json = writer.bytes
    }
}
