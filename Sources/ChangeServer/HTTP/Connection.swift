import Model

/// The connection a request came on, as the routes see it: a request the route does not answer at once is
/// answered later through it (from any thread), or held by the feed until its collection moves on.
protocol Connection: AnyObject, Sendable {
    /// Answers the request; callable from any thread, once.
    func answer(_ response: Response)
    /// Answers the request with the event stream `start` (whose first event took long to make); callable from any
    /// thread, once, in place of `answer`.
    func startStream(_ start: StreamStart)
    /// Claims the request's record for the journal, right before it is submitted; false when a stopping server
    /// gave up on the request and answered it `503` already: the record must then not be submitted.
    func claimCommit() -> Bool
    /// Whether a stopping server gave up on the request (and answered it `503`).
    var isAbandoned: Bool { get }
    /// Hands the request to the feed of its event loop, which answers it when `subject` moves past `since` or after
    /// `timeout` seconds (loop thread only); `cursor` is the request's own (`FeedCaching.nextCursor`).
    func hold(on subject: FeedSubject, since: Version, timeout: Int, cursor: Int64?)
}
