import Model

/// Why a request of `ChangeServerClient` failed, as one typed error.
public enum WriteError: Error, Hashable, Sendable {
    /// The server (or a front) answered with an error. With the contract's body (`code` not nil) the server says
    /// what it did: a refused mutation changed nothing.
    case refused(ServerError)
    /// No answer came: the connection failed or was lost, or the answer took longer than the client's `timeout`.
    /// A write may have been committed all the same: read (or write with a `WriteCondition`) before writing again.
    case noAnswer(String)
    /// The task was cancelled: before the request went (nothing was sent), or while it was under way (a write may
    /// have been committed all the same, so the outcome counts as unknown either way).
    case cancelled
    /// A success whose answer is not the contract's wire format (another status, a body that does not decode):
    /// the server, or a front, answered, and a write may have been committed.
    case invalidAnswer(String)
    /// The base URL and names do not make a URL.
    case invalidURL(String)

    /// Whether a write may have been committed though it failed: no answer came, a success came in a form the
    /// client cannot read, or a `5xx` came with a page that is not the server's (a front's `502`, `504` or `524`:
    /// it may have passed the write on before its server went away). Every other failure changed nothing: the
    /// server's own refusals (`code` not nil) and a front's `4xx`.
    public var outcomeUnknown: Bool {
        switch self {
        case .noAnswer, .cancelled, .invalidAnswer: true
        case .refused(let error): error.code == nil && error.status >= 500
        case .invalidURL: false
        }
    }

    /// The error body's code, when the server refused the request with one.
    public var code: ErrorCode? {
        if case .refused(let error) = self { return error.code }
        return nil
    }

    /// The version a `412 precondition_failed` names (`ServerError.current`).
    public var current: Version? {
        if case .refused(let error) = self { return error.current }
        return nil
    }
}

extension WriteError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .refused(let error): "refused (\(error))"
        case .noAnswer(let why): "no answer: \(why)"
        case .cancelled: "cancelled"
        case .invalidAnswer(let why): "invalid answer: \(why)"
        case .invalidURL(let text): "invalid URL: \(text)"
        }
    }
}
