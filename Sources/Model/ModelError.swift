/// Why a mutation was rejected. A rejected mutation leaves the collection untouched.
public struct ModelError: Error, Hashable, Sendable {
    /// The error codes Model reports; the server maps each to a status.
    public enum Code: String, Sendable {
        /// An id that is empty or longer than `maximumIDByteCount` bytes (HTTP 400).
        case invalidID = "invalid_id"
        /// A section or item id that already exists, or appears twice in one request (HTTP 409).
        case duplicateID = "duplicate_id"
        /// The same section or item named twice in one op's list of references (HTTP 409).
        case duplicateReference = "duplicate_reference"
        /// A section reference that names no section (HTTP 409).
        case sectionNotFound = "section_not_found"
        /// An item reference that names no item (HTTP 409).
        case itemNotFound = "item_not_found"
        /// An index outside the range the op allows (HTTP 409).
        case indexOutOfRange = "index_out_of_range"
    }

    /// What went wrong, as a code.
    public var code: Code
    /// A sentence for people.
    public var message: String
    /// The index of the rejected op in the mutation's list, when the mutation was a list of ops.
    public var opIndex: Int?

    /// An error with its code, a message for people, and the index of the op that failed, if any.
    public init(_ code: Code, _ message: String, opIndex: Int? = nil) {
        self.code = code
        self.message = message
        self.opIndex = opIndex
    }
}
