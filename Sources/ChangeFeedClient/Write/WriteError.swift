import Model

/// Why a request of `ChangeServerClient` failed, as one typed error.
public enum WriteError: Error, Hashable, Sendable {
    /// The server (or a front) answered with an error. With the contract's body (`code` not nil) the server says
    /// what it did: a refused mutation changed nothing.
    case refused(ServerError)
    /// No answer came: the connection failed or was lost, or the answer took longer than the client's `timeout`.
    /// A write may have been committed all the same: read (or write with a `WriteCondition`) before writing again.
    case noAnswer(String)
    /// No connection to the server could be made (refused, a host name not found, no route, or none within the
    /// client's `timeout`): nothing was sent, and the request can be sent again as it is. Only a client that makes
    /// its own connections can say so (on Linux, to an `http://` server, given no session): a `URLSession` may
    /// have sent the request on a kept connection before it failed to connect again, and its failures are
    /// `noAnswer`.
    case unreachable(String)
    /// The task was cancelled. `sent: false` before any of the request went (before it, or while the client's own
    /// connection was being made): nothing was done. `sent: true` once it may have gone: a write may have been
    /// committed all the same.
    case cancelled(sent: Bool)
    /// A success whose answer is not the contract's wire format (another status, a body that does not decode):
    /// the server, or a front, answered, and a write may have been committed.
    case invalidAnswer(String)
    /// The base URL and names do not make a URL.
    case invalidURL(String)
    /// The request cannot be made from what was given: data or a view's definition that is not one JSON value
    /// (`JSONData(canonical:)` takes any text), a token that a header cannot carry. Nothing was sent.
    case invalidRequest(String)

    /// Whether a write may have been committed though it failed: no answer came, the task was cancelled while
    /// the request was under way, a success came in a form the client cannot read, or a `5xx` came with a page
    /// that is not the server's (a front's `502`, `504` or `524`: it may have passed the write on before its
    /// server went away). Every other failure changed nothing: the server's own refusals (`code` not nil), a
    /// front's `4xx`, and a request that was never sent.
    public var outcomeUnknown: Bool {
        switch self {
        case .noAnswer, .invalidAnswer: true
        case .cancelled(let sent): sent
        case .refused(let error): error.code == nil && error.status >= 500
        case .unreachable, .invalidURL, .invalidRequest: false
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
        case .unreachable(let why): "unreachable: \(why)"
        case .cancelled(let sent): sent ? "cancelled while under way" : "cancelled before it was sent"
        case .invalidAnswer(let why): "invalid answer: \(why)"
        case .invalidURL(let text): "invalid URL: \(text)"
        case .invalidRequest(let why): "invalid request: \(why)"
        }
    }
}
