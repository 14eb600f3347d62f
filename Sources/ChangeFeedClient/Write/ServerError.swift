import Model

/// An error answer (a `4xx` or `5xx`) to a request `ChangeServerClient` sent: the status, and the contract's error
/// body, `{"error": {"code", "message", "op"?}, "current"?}`.
public struct ServerError: Error, Hashable, Sendable {
    /// The HTTP status.
    public var status: Int
    /// The body's code: what to match on. Nil when the body is not the contract's (a front's own page: an nginx
    /// `502`, say), which says nothing of what the server did.
    public var code: ErrorCode?
    /// The body's message, for people (or the start of a body that is not the contract's).
    public var message: String
    /// The index of the rejected op, for a rejected `POST .../mutations` (`409`, or `400` for an op's own shape).
    public var op: Int?
    /// How long the server asked to wait before asking again (`Retry-After`), with `503` and `429`.
    public var retryAfter: Duration?
    /// The collection's (or view's) version when the server refused with `412 precondition_failed`: a conditional
    /// write is decided again from it, with no other request.
    public var current: Version?

    public init(
        status: Int, code: ErrorCode?, message: String, op: Int? = nil, retryAfter: Duration? = nil,
        current: Version? = nil
    ) {
        self.status = status
        self.code = code
        self.message = message
        self.op = op
        self.retryAfter = retryAfter
        self.current = current
    }
}

extension ServerError: CustomStringConvertible {
    public var description: String {
        let code = code.map { " \($0)" } ?? ""
        let op = op.map { " at op \($0)" } ?? ""
        return "\(status)\(code)\(op): \(message)"
    }
}
