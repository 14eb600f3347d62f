/// Why following a feed stopped: every failure the client does not retry by itself, as one typed error.
public enum FeedError: Error, Hashable, Sendable {
    /// An answer that is not the wire format of the contract (not JSON, a field missing or of the wrong type).
    case invalidAnswer(String)
    /// A changeset that breaks the changeset rules, or does not fit the mirror it should apply to.
    case invalidChangeset(String)
    /// The server refused the request in a way that retrying cannot fix (`400`, `401`, `403`, ...): the status
    /// and the error body's code and message.
    case refused(status: Int, code: String, message: String)
    /// The base URL and name do not make a URL.
    case invalidURL(String)
    /// The request cannot be made from what was given: a token that a header cannot carry.
    case invalidRequest(String)
}

extension FeedError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .invalidAnswer(let why): "invalid answer: \(why)"
        case .invalidChangeset(let why): "invalid changeset: \(why)"
        case .refused(let status, let code, let message): "refused (\(status) \(code)): \(message)"
        case .invalidURL(let text): "invalid URL: \(text)"
        case .invalidRequest(let why): "invalid request: \(why)"
        }
    }
}

extension FeedError {
    /// `.refused` with an error answer's status, code (`unknown` for a body that is not the contract's) and message.
    init(refusal error: ServerError) {
        self = .refused(status: error.status, code: error.code?.rawValue ?? "unknown", message: error.message)
    }
}
