import Model

/// A changeset with its JSON, encoded once where it is made: the mutation's answer and every poll waiting at its
/// `from` version embed the same bytes.
struct EncodedChangeset: Sendable {
    let changeset: Changeset
    let json: [UInt8]

    init(_ changeset: Changeset) {
        self.changeset = changeset
        var writer = JSONWriter()
        writer.changeset(changeset)
        json = writer.bytes
    }
}
