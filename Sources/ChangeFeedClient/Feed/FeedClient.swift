import Foundation
import Model

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Follows one collection or view of a ChangeServer over its long-poll change feed.
///
/// `events()` runs the client loop of the contract: a reset (the snapshot) first, or a poll from a saved cursor;
/// then each poll with the answer's `next` query (or `since=<to>` where the server sent none); a `410` starts
/// over from a reset; network errors, `5xx`, `408`, `429` and a `404` to a poll with `since` (the collection may be
/// deleted and made again) wait and retry with jittered exponential backoff, at least as long as `Retry-After` says
/// (at most an hour); a deleted collection, or none found by a reset, is reported once as `.missing` and asked for
/// again every `missingRetry`; a `404 route_not_found` (a wrong base URL) is thrown, another `404` (a front's own
/// page) retried as a failure. The first poll from a saved version and the first after a failure are short
/// (`timeout=0`), so that the feed is `FeedStatus.live` as soon as the server answers. Nothing loops without
/// waiting: the loop waits on the network, or sleeps.
public struct FeedClient: Sendable {
    /// What is followed: a collection, or a view (a live query the server keeps).
    public enum Kind: String, Hashable, Sendable, Codable {
        case collection
        case view

        var pathSegment: String { self == .collection ? "collections" : "views" }
        /// The member naming the collection or view in answers.
        var bodyKey: String { rawValue }

        /// The code of a `404` saying that the collection (or view) does not exist, rather than that there is no
        /// such route (a base URL with a wrong path).
        var notFoundCode: ErrorCode { self == .collection ? .collectionNotFound : .viewNotFound }
    }

    /// The server, for example `http://127.0.0.1:8080`.
    public let baseURL: URL
    /// The collection's or view's name.
    public let name: String
    /// Whether `name` is a collection or a view.
    public let kind: Kind
    let token: String?
    /// How long the server may hold each poll (the `timeout` parameter), sent in whole seconds from 1 to 300
    /// (`pollSeconds`).
    public var pollTimeout: Duration
    /// The wait before retrying after a failure.
    public var backoff: Backoff
    /// How often a collection or view reported `.missing` is asked for again (each wait a random 50% to 100% of
    /// it, so that clients that saw it go do not come back together), so that it is followed soon after it is made.
    public var missingRetry: Duration = .seconds(2)
    /// How long resets at the epoch a `410 collection_deleted` ended are waited out as stale (a cache's copy from
    /// before the deletion, or a server behind on it); past it such a reset is taken: the epoch came back (a crash
    /// lost the deletion, under `--fsync interval`), and the collection is not shown missing for good.
    public var staleResetPatience: Duration = .seconds(10)
    let transport: Transport

    /// A client of `name` on the server at `baseURL` (for example `http://127.0.0.1:8080`).
    /// - Parameters:
    ///   - token: sent as `Authorization: Bearer <token>` when the server has a read token.
    ///   - session: nil, best left so: `defaultSession`, but on Linux a connection of the client's own for each
    ///     request to an `http://` URL (`SocketHTTP`: FoundationNetworking traps on an answer cut inside its
    ///     headers and spins while a connection goes unanswered), and for `https://` a session of its own with
    ///     `defaultSession`'s configuration (see `sessionOfItsOwn`). A session given here carries every request,
    ///     on Linux through FoundationNetworking, shared as given; its own timeouts are raised by each request's,
    ///     and it should have no `URLCache`: FoundationNetworking traps when a request is cancelled while it looks
    ///     in the cache.
    public init(
        baseURL: URL, name: String, kind: Kind = .collection, token: String? = nil,
        pollTimeout: Duration = .seconds(25), backoff: Backoff = Backoff(),
        session: URLSession? = nil
    ) {
        self.baseURL = baseURL
        self.name = name
        self.kind = kind
        self.token = token
        self.pollTimeout = pollTimeout
        self.backoff = backoff
        // On Linux an `http://` server is asked through sockets: no session of its own is made for nothing.
        let usesSockets = session == nil && Self.sessionOfItsOwn
        let ownSession = Self.sessionOfItsOwn && !(usesSockets && SocketHTTP.handles(baseURL))
        self.transport = Transport(
            session: session ?? (ownSession ? Self.makeSession() : Self.defaultSession), usesSockets: usesSockets)
    }

    /// Whether a client given no session makes one of its own: on Linux. There the first request on a new
    /// connection must be answered at once, or FoundationNetworking wakes the process without end until it is
    /// (see `FeedEvents.Iterator.recovering`); a feed's short poll opens its connection for its held polls, but
    /// feeds sharing a session take each other's connections, and with three feeds started together one held
    /// poll landed on a connection opened for it: 0.8 of a core for the poll's 25 s. Apple's URLSession does not
    /// spin, and its feeds share `defaultSession`.
    static var sessionOfItsOwn: Bool {
        #if canImport(FoundationNetworking)
            true
        #else
            false
        #endif
    }

    /// A session with `defaultSession`'s configuration.
    static func makeSession() -> URLSession {
        let configuration = URLSessionConfiguration.default
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpMaximumConnectionsPerHost = maximumFeedsPerHost
        return URLSession(configuration: configuration)
    }

    /// The events of the feed, from a reset, or from `cursor` (a version the app saved with its mirror: the
    /// first event is then the changeset from it, or a reset when the server no longer keeps it).
    ///
    /// Iterate it in a task; cancelling the task ends the held request at once and the sequence then ends.
    /// `onStatus` hears where the feed stands (`FeedStatus`), on the iterating task, while it iterates.
    /// - Throws (from the iterator): `FeedError` for what retrying cannot fix.
    public func events(
        resumingFrom cursor: Version? = nil, onStatus: (@Sendable (FeedStatus) -> Void)? = nil
    ) -> FeedEvents {
        FeedEvents(client: self, cursor: cursor, onStatus: onStatus)
    }

    /// The session used unless one is given: `URLSession.shared`'s configuration without a `URLCache`, and with
    /// room for `maximumFeedsPerHost` connections to a host. A feed answer is never to be read from a local cache,
    /// and on Linux a request cancelled while FoundationNetworking looks in its cache traps the process
    /// (FoundationNetworking's task registry loses the task), which a follower stopped at the wrong moment would do.
    public static let defaultSession: URLSession = makeSession()

    /// Feeds of one server that `defaultSession` follows at once without delay. Over HTTP/1.1 each feed holds a
    /// connection while its poll is held; a session's default allows 6 per host (4 on iOS), and a seventh feed's
    /// poll would queue behind the others' for up to their whole timeout, its changes that late.
    public static let maximumFeedsPerHost = 64

    /// The wait before asking again for a collection or view that is missing: `missingRetry`, jittered, at least
    /// `Retry-After`.
    func missingRetryDelay(atLeast floor: Duration?) -> Duration {
        max(max(missingRetry, Backoff.shortestStep) * Double.random(in: 0.5...1.0), floor ?? .zero)
    }

    /// The longest a server holds a poll (API.md: a `timeout` above it is clamped).
    static let maximumPollTimeout = Duration.seconds(300)

    /// An empty answer held less than this came back quick: half of `pollTimeout`, as the server clamps it. The
    /// server answers empty only once it held a poll its whole timeout; a quick empty answer came from a shared
    /// cache, which gives a poll's answer to every client that joined it, also to one that joined late, or from a
    /// cache or server that misbehaves. The first is polled again at once: the cache is holding the next poll right
    /// now, and joining it puts the late client back in step with the others (waiting would keep it late, and a
    /// client later than the cache keeps an empty answer reaches the server on its own).
    var quickEmptyAnswer: Duration {
        .seconds(pollSeconds) / 2
    }

    /// The `timeout` sent: `pollTimeout` in whole seconds, at least 1 (the server answers `timeout=0` at once, so
    /// every empty answer would be quick and, after the first, a failure's wait; with a threshold of 0 none would
    /// be, and the loop would spin), at most the server's longest.
    var pollSeconds: Int64 {
        min(max(pollTimeout.components.seconds, 1), Self.maximumPollTimeout.components.seconds)
    }

    /// The wait before retry `attempt`: the backoff's, at least `Retry-After`. After a `429` (`busy`: the server
    /// holds as many polls as it may, `--max-held-polls`, and answers short ones) it is at most `busyRetryCap`
    /// (jittered) unless `Retry-After` asks more: every `429` counts as a failure, and the backoff's doubling
    /// took a refused feed's changes, which its short polls fetch, up to the backoff's cap late (25 s measured
    /// with the default 30 s), and its `.live` as long after the server had room again.
    func retryDelay(attempt: Int, retryAfter: Duration?, busy: Bool) -> Duration {
        let delay = backoff.delay(attempt: attempt, atLeast: retryAfter ?? .zero)
        guard busy else { return delay }
        return min(delay, max(Self.busyRetryCap * Double.random(in: 0.5...1.0), retryAfter ?? .zero))
    }

    /// The longest wait after a `429` that did not ask for more: changes come at most about this late while the
    /// server refuses the feed's held polls.
    static let busyRetryCap = Duration.seconds(4)

    /// How long the server may hold the first held poll after a `429` (`timeout=2`): if the server takes it, its
    /// answer comes within this and the feed is `.live` again, rather than when a whole poll's timeout ends.
    static let probeSeconds: Int64 = 2

    /// How long a short poll (`timeout=0`) may go unanswered before it is a failure: the server answers it at
    /// once. `Transport` lets it wait a second more, between two bytes of the answer.
    static let shortPollTimeout = Duration.seconds(10)

    /// `next`, the query an answer says to poll with, unless it asks for an answer at once (`timeout=0`): a short
    /// poll's answer, which a cache that ignores the query string may hand to a held poll. Its `timeout=0` and
    /// the cursor counted for it would make every poll after it short; nil, and the poll asks with `since` and
    /// the feed's own timeout.
    static func heldQuery(_ next: String?) -> String? {
        guard let next, !next.split(separator: "&").contains("timeout=0") else { return nil }
        return next
    }

    /// What a name or id keeps unescaped in the path: a `/` is escaped too, so that it is one path segment (the
    /// server refuses it in a name, rather than serving another route).
    static let segmentAllowed = CharacterSet.urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))

    /// `text` as one path segment, or nil for an empty one. A segment of dots alone (`.`, `..`) is written as
    /// `%2E`s: URL handling removes dot segments, and `…/items/..` was sent as the collection's own path (a
    /// `DELETE` of item `..` deleted the collection).
    static func pathSegment(_ text: String) -> String? {
        guard !text.isEmpty else { return nil }
        if text.allSatisfy({ $0 == "." }) { return String(repeating: "%2E", count: text.count) }
        return text.addingPercentEncoding(withAllowedCharacters: segmentAllowed)
    }

    /// The feed URL for a poll: `next` as given by the last answer, else `since` with `timeout` (by default
    /// `pollSeconds`; none asks for a reset).
    func feedURL(next: String?, since: Version?, timeout: Int64? = nil) throws(FeedError) -> URL {
        if let problem = Self.problem(withBaseURL: baseURL) { throw .invalidURL(problem) }
        guard let escapedName = Self.pathSegment(name) else {
            throw .invalidURL("\(baseURL): the \(kind)'s name is empty")
        }
        let seconds = timeout ?? pollSeconds
        let query = next ?? since.map { "since=\($0)&timeout=\(seconds)" } ?? "timeout=\(seconds)"
        guard
            let url = URL(
                string: baseURL.absoluteString.trimmingSuffix("/")
                    + "/v1/\(kind.pathSegment)/\(escapedName)/changes?\(query)")
        else { throw .invalidURL("\(baseURL) \(name) \(query)") }
        return url
    }

    /// Why `url` is no server's base URL, if it is not: a scheme other than `http` or `https` (which would be
    /// retried without end as a failure), no host, or a query or fragment (the paths are appended after them).
    static func problem(withBaseURL url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            return "\(url): not an http:// or https:// URL"
        }
        guard let host = url.host, !host.isEmpty else { return "\(url): no host" }
        if url.query != nil || url.fragment != nil { return "\(url): a base URL has no query or fragment" }
        return nil
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
