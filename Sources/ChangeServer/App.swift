import Model
import Synchronization

/// What a route does with a request.
enum RouteResult {
    /// Answer now.
    case respond(Response)
    /// The route answers later through the request's `Connection` (a mutation waiting for its commit, a held poll).
    case later
    /// A `text/event-stream` response, followed by the worker's `StreamHub`.
    case stream(StreamStart)
}

/// The application: authentication, CORS, routing to the handlers in `Routes/`. It is shared by the workers
/// (one per event loop) and called on their threads; what it holds is immutable or behind locks. Routes take a
/// plain `Request` and answer through a `Connection`, so they run the same in-process and behind libmicrohttpd.
final class App: Sendable {
    /// Where the server is in its life; requests get `503 shutting_down` once it is past `serving`.
    enum State: UInt8, AtomicRepresentable {
        case starting
        case serving
        case draining
        case stopped
    }

    let config: Config
    let logger: Logger
    let metrics: Metrics
    let registry: Registry
    let committer: Committer
    var views: ViewRegistry { committer.executor.views }
    /// Memory for request bodies in flight, shared by the workers (`--max-body-memory`).
    let bodyBudget: MemoryBudget
    /// Memory for answers over 1 MiB until they are sent, shared by the workers (`--max-response-memory`).
    let responseBudget: MemoryBudget
    /// Free space of `--data-dir`, against `--disk-reserve-bytes`; nil with `--postgres`.
    let diskSpace: DiskSpace?
    private let state = Atomic<State>(.starting)
    private let workerList = Mutex<[Worker]>([])
    /// The process's exit status once the loops have returned: 0, or `fallenBehindStatus`.
    private let exitStatusValue = Atomic<Int32>(0)
    /// The warning that clients fall behind the kept history (`noteCursorBehindHistory`).
    let historyWarning = OncePerMinute()

    /// The exit status of a server that stopped because it could not catch up with a shared database (sysexits'
    /// `EX_TEMPFAIL`: a supervisor restarts it, and it starts from the snapshot).
    static let fallenBehindStatus: Int32 = 75

    init(config: Config, logger: Logger, metrics: Metrics, registry: Registry, committer: Committer) {
        self.config = config
        self.logger = logger
        self.metrics = metrics
        self.registry = registry
        self.committer = committer
        bodyBudget = MemoryBudget(limit: config.maxBodyMemory)
        responseBudget = MemoryBudget(limit: config.maxResponseMemory)
        // With --postgres nothing is written to --data-dir: its free space decides nothing.
        diskSpace =
            config.postgres == nil ? DiskSpace(path: config.dataDirectory, reserve: config.diskReserveBytes) : nil
        sameCORSHeadersForAll =
            config.corsOrigins.isEmpty ? [] : config.corsOrigins.contains("*") ? Self.anyOriginHeaders : nil
    }

    var workers: [Worker] { workerList.withLock { $0 } }

    /// Adds a worker (before the loops start).
    func add(_ worker: Worker) {
        workerList.withLock { $0.append(worker) }
    }

    var currentState: State { state.load(ordering: .acquiring) }

    /// The loops run: requests are served.
    func startServing() {
        state.store(.serving, ordering: .releasing)
    }

    /// Stops accepting connections, answers held polls with `503`, ends event streams (their clients reconnect
    /// from their last event), makes pending mutations durable and answers them, and ends the loops once their
    /// requests are done. Callable from any thread, once.
    func shutDown() {
        guard state.compareExchange(expected: .serving, desired: .draining, ordering: .acquiringAndReleasing).exchanged
        else { return }
        logger.log(
            .notice,
            "shutting down: answering \(metrics.heldPolls) held polls with 503 and ending \(metrics.openStreams) "
                + "event streams (their clients reconnect from their last event)")
        for worker in workers {
            worker.post {
                worker.server.quiesce()
                worker.feed.shutDown()
                worker.streams.shutDown()
            }
        }
        committer.flush()
        for worker in workers { worker.post { worker.server.stop(grace: 2500) } }
    }

    /// Stops serving, as `SIGTERM` does, and exits with `status`: for a state this server cannot go on from.
    /// Callable from any thread.
    func stop(exitStatus status: Int32) {
        exitStatusValue.store(status, ordering: .relaxed)
        startThread { [self] in shutDown() }
    }

    var exitStatus: Int32 { exitStatusValue.load(ordering: .relaxed) }

    /// The loops have returned: closes the journal (its threads are joined).
    func finish() {
        committer.close()
        state.store(.stopped, ordering: .releasing)
    }

    /// Runs `task` with each worker on its own loop thread.
    func onEveryWorker(_ task: @escaping @Sendable (Worker) -> Void) {
        for worker in workers { worker.post { task(worker) } }
    }

    // MARK: Requests

    /// The CORS headers every response to this request carries. With `--cors-origin` set, every answer says
    /// `Vary: Origin`, also one to a request without an allowed `Origin` (a Swift app, curl): a shared cache that
    /// stored that answer must not hand it to a browser, which would find no `Access-Control-Allow-Origin` in it.
    /// With `*`, every answer allows every origin the same way, and varies with none: a cache keeps one answer for
    /// all of them, where echoing each `Origin` kept one per origin and split the feed's collapsing (3.35 origin
    /// requests per mutation through nginx with 10 origins). Browsers take `*` for any request without
    /// credentials, which is every request here (the server never allows credentials).
    func corsHeaders(for request: Request) -> [(name: String, value: String)] {
        // The same for every request (also what quick reads add): none, or `*`'s.
        if let same = sameCORSHeadersForAll { return same }
        guard let origin = allowedOrigin(of: request) else { return [("Vary", "Origin")] }
        return [
            ("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
            ("Access-Control-Expose-Headers", "ETag, Retry-After"),
        ]
    }

    /// The CORS headers every request gets, whatever it sends: none without `--cors-origin`, `*`'s with it; nil
    /// when they depend on the request's `Origin` (origins named one by one). Decided once: every request asks.
    let sameCORSHeadersForAll: [(name: String, value: String)]?

    private static let anyOriginHeaders: [(name: String, value: String)] = [
        ("Access-Control-Allow-Origin", "*"), ("Access-Control-Expose-Headers", "ETag, Retry-After"),
    ]

    /// The request's `Origin` when `--cors-origin` allows it.
    private func allowedOrigin(of request: Request) -> String? {
        guard let origin = request.header("Origin"),
            config.corsOrigins.contains(origin) || config.corsOrigins.contains("*")
        else { return nil }
        return origin
    }

    /// Routes a complete request; returns the route template it matched (for metrics) and what to do. `screened`
    /// is the route `screen` found from the request's headers, when it was screened: the route, method,
    /// authorization and media type are not checked twice, only the server's state, which may have changed since.
    /// The connection is made only for a route that answers later (a read answered at once never needs one).
    func handle(_ request: Request, screened: Route? = nil, on connection: @autoclosure () -> Connection)
        -> (route: String, result: RouteResult)
    {
        var template = "unmatched"
        do throws(HTTPError) {
            // `screen` answered such a preflight already; in-process callers come here without it.
            if screened == nil, let response = unmatchedPreflight(request) { return (template, .respond(response)) }
            let route: Route
            if let screened {
                if request.method != "OPTIONS", currentState != .serving { throw .shuttingDown }
                route = screened
            } else {
                route = try check(request)
            }
            template = route.template
            if request.method == "OPTIONS" {
                var response = preflight(request, route)
                switch route {
                case .changes, .viewChanges:
                    response.headers.append(("Cache-Control", feedCaching.cacheControl(.notStored)))
                default: break
                }
                return (template, .respond(response))
            }
            let result = try dispatch(request, route, connection)
            guard case .respond(let response) = result else { return (template, result) }
            return (template, .respond(Self.markedForCaches(response, request)))
        } catch {
            return (template, .respond(errorResponse(error, request)))
        }
    }

    /// A read's answer that says nothing of caching is marked `no-store` (`Response.notStored`): a cache or CDN
    /// would otherwise keep it for a lifetime of its own choosing.
    private static func markedForCaches(_ response: Response, _ request: Request) -> Response {
        guard request.method == "GET" || request.method == "HEAD",
            !response.headers.contains(where: { $0.name == "Cache-Control" })
        else { return response }
        var marked = response
        marked.headers.append(("Cache-Control", Response.notStored))
        return marked
    }

    /// What can be decided from a request's headers alone, before its body is read: the route, the method, the
    /// server's state, authorization and the media type. The route when the request passed (for `handle`), the
    /// route template (for metrics) and the refusal, if any.
    func screen(_ request: Request) -> (passed: Route?, template: String, refusal: Response?) {
        if let response = unmatchedPreflight(request) { return (nil, "unmatched", response) }
        do throws(HTTPError) {
            let route = try check(request)
            return (route, route.template, nil)
        } catch {
            let template = (try? Route.match(request.path))?.map(\.template) ?? "unmatched"
            return (nil, template, errorResponse(error, request))
        }
    }

    /// The checks every request passes before its route runs; the matched route.
    private func check(_ request: Request) throws(HTTPError) -> Route {
        // First: while stopping every request but a preflight is `503` (with `Connection: close`), whatever its
        // route, so that no connection is kept for another.
        if request.method != "OPTIONS", currentState != .serving { throw .shuttingDown }
        guard let route = try Route.match(request.path) else { throw .routeNotFound(request.path) }
        if request.method == "OPTIONS" { return route }
        guard route.methods.contains(request.method) else {
            switch route {
            case .viewWrite, .viewItem: throw .viewsAreReadOnly(request.method, route)
            default: throw .methodNotAllowed(request.method, route)
            }
        }
        try authorize(request, route)
        if request.method == "PUT" || request.method == "POST" { try checkContentType(request) }
        // A write's conditions are read again by its route; checked here, a malformed one is refused before its
        // body is read (and before `100 Continue`).
        if request.method != "GET" && request.method != "HEAD" {
            do throws(HTTPError) {
                _ = try Self.conditions(request)
            } catch {
                // An `If-Match` that can never match names the current version, as every `412` does: a front that
                // weakens the ETags it passes on (nginx when it compresses) makes every write that sends one back
                // fail so, and the client needs the version to decide again.
                var error = error
                if error.code == .preconditionFailed { error.current = currentVersion(of: route)?.description }
                throw error
            }
        }
        return route
    }

    /// The version of the collection or view a route writes to; nil when it does not exist.
    private func currentVersion(of route: Route) -> Version? {
        switch route {
        case .collection(let name), .mutations(let name), .item(let name, _): registry.entry(name)?.version
        case .view(let name): views.entry(name)?.version
        default: nil
        }
    }

    /// An error's response, whether found when the headers arrived (`screen`) or later; on the feed, `410`s and
    /// `404`s may be shared briefly by caches (`FeedCaching`), nothing else.
    func errorResponse(_ error: HTTPError, _ request: Request) -> Response {
        var response = Response.error(error)
        if Route.isFeedPath(request.path) {
            response.headers += feedCaching.headers(.init(error: error))
        }
        return Self.markedForCaches(response, request)
    }

    private func dispatch(_ request: Request, _ route: Route, _ connection: () -> Connection) throws(HTTPError)
        -> RouteResult
    {
        let method = request.method == "HEAD" ? "GET" : request.method
        switch (route, method) {
        case (.health, _): return .respond(health())
        case (.metrics, _): return .respond(metricsText())
        case (.collections, _): return .respond(try listCollections(request))
        case (.collection(let name), "GET"): return try snapshot(request, name, connection)
        case (.collection(let name), "PUT"): return try replace(request, name, connection())
        case (.collection(let name), _): return try deleteCollection(request, name, connection())
        case (.mutations(let name), _): return try mutate(request, name, connection())
        case (.changes(let name), _):
            return try changes(request, { () throws(HTTPError) in try existing(name) }, connection())
        case (.item(let name, let id), "GET"): return .respond(try item(name, id))
        case (.item(let name, let id), "PUT"): return try upsertItem(request, name, id, connection())
        case (.item(let name, let id), _): return try deleteItem(request, name, id, connection())
        case (.asset(let path), _): return .respond(asset(request, path))
        case (.views, _): return .respond(try listViews(request))
        case (.view(let name), "GET"): return try viewSnapshot(request, name, connection)
        case (.view(let name), "PUT"): return try defineView(request, name, connection())
        case (.view(let name), _): return try deleteView(request, name, connection())
        case (.viewChanges(let name), _):
            return try changes(request, { () throws(HTTPError) in try existingView(name) }, connection())
        case (.viewItem(let name, let id), _): return .respond(try viewItem(name, id))
        case (.viewWrite, _): throw .viewsAreReadOnly(request.method, route)
        }
    }

    // MARK: Cross-cutting checks

    /// A CORS preflight from an allowed origin for a path no route matches, or that names an invalid collection or
    /// view: `204`, allowing every method the API has (as every preflight does), so that the request itself goes
    /// and the page reads its `404` or `400`; refused, the preflight hid that answer behind the browser's "Failed
    /// to fetch". Nil for any other request, a plain `OPTIONS` of such a path included (its `404` or `400`).
    private func unmatchedPreflight(_ request: Request) -> Response? {
        guard request.method == "OPTIONS", request.header("Access-Control-Request-Method") != nil,
            allowedOrigin(of: request) != nil
        else { return nil }
        do throws(HTTPError) {
            if try Route.match(request.path) != nil { return nil }
        } catch {}
        var response = Response(.noContent, headers: Self.preflightHeaders)
        if Route.isFeedPath(request.path) {
            response.headers.append(("Cache-Control", feedCaching.cacheControl(.notStored)))
        }
        return response
    }

    /// A preflight's CORS headers: every method of the API, whatever the path takes (see `preflight`).
    private static let preflightHeaders: [(name: String, value: String)] = [
        ("Access-Control-Allow-Methods", (Route.allMethods + ["OPTIONS"]).joined(separator: ", ")),
        ("Access-Control-Allow-Headers", "Authorization, Content-Type, If-Match, If-None-Match, Last-Event-ID"),
        ("Access-Control-Max-Age", "600"),
    ]

    private func preflight(_ request: Request, _ route: Route) -> Response {
        var headers: [(name: String, value: String)] = [
            ("Allow", (route.methods + ["OPTIONS"]).joined(separator: ", "))
        ]
        // Every method of the API, not the route's alone: refused by the preflight, a method the route does not
        // take showed the page "Failed to fetch" where the request itself gets a readable `405`.
        if allowedOrigin(of: request) != nil { headers += Self.preflightHeaders }
        return Response(.noContent, headers: headers)
    }

    /// Writes need the write token when one is set; reads need the read token or the write token when a read
    /// token is set. With only a read token, writes need it too: a server with any token is never writable
    /// anonymously. `/healthz` and the web client's files are always open: they hold no data.
    private func authorize(_ request: Request, _ route: Route) throws(HTTPError) {
        guard config.readToken != nil || config.writeToken != nil, route != .health else { return }
        if case .asset = route { return }
        let isWrite = request.method != "GET" && request.method != "HEAD"
        let accepted: [String]
        if isWrite {
            accepted = config.writeToken.map { [$0] } ?? config.readToken.map { [$0] } ?? []
        } else {
            accepted = config.readToken.map { [$0] + (config.writeToken.map { [$0] } ?? []) } ?? []
        }
        guard !accepted.isEmpty else { return }
        // Which of two lines is the credential would be a guess (a front may add one to the client's): the first
        // had decided.
        if request.headerLines("Authorization") > 1 { throw .repeatedAuthorization }
        let presented = bearerToken(request.header("Authorization"))
        if let presented, accepted.contains(where: { constantTimeEquals($0, presented) }) { return }
        throw .unauthorized(tokenPresented: presented != nil)
    }

    private func bearerToken(_ header: String?) -> String? {
        guard let header, header.count > 7, header.prefix(7).lowercased() == "bearer " else { return nil }
        return String(header.dropFirst(7)).trimmingSpaces()
    }

    private func checkContentType(_ request: Request) throws(HTTPError) {
        // One pass over the headers (names are kept lowercased), since every write comes this way; a second one
        // only for a `Content-Type` other than the usual value, checked after the coding as before.
        var checksMediaTypes = false
        for header in request.headers {
            if header.name == "content-encoding" {
                // A body is never decoded: one sent compressed would be read as JSON and refused `bad_json`, which
                // names the wrong cause (RFC 9110 §8.4: `415` for a content coding the server does not take).
                let codings = header.value.split(separator: ",")
                if codings.contains(where: { String($0).trimmingSpaces().lowercased() != "identity" }) {
                    throw .unsupportedContentEncoding(request.listHeader("Content-Encoding") ?? header.value)
                }
            } else if header.name == "content-type" && header.value != "application/json" {
                checksMediaTypes = true
            }
        }
        // Every line counts: with two, the first had decided, and `application/json` then `text/plain` was read
        // as JSON.
        guard checksMediaTypes else { return }
        for header in request.headers where header.name == "content-type" { try checkJSONMediaType(header.value) }
    }

    /// Throws unless `contentType` is `application/json`, in UTF-8 if it names a charset.
    private func checkJSONMediaType(_ contentType: String) throws(HTTPError) {
        let parts = contentType.split(separator: ";").map { String($0).trimmingSpaces() }
        let mediaType = parts.first?.lowercased()
        guard mediaType == "application/json" else {
            throw .unsupportedMediaType(contentType, isForm: mediaType == "application/x-www-form-urlencoded")
        }
        // JSON is UTF-8 (RFC 8259 §8.1): a body said to be in another charset would be read as UTF-8 regardless.
        // US-ASCII is UTF-8's subset, and some clients label JSON so.
        for parameter in parts.dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                String($0).trimmingSpaces()
            }
            guard pair.count == 2, pair[0].lowercased() == "charset" else { continue }
            let quoted = pair[1].count >= 2 && pair[1].hasPrefix("\"") && pair[1].hasSuffix("\"")
            let charset = (quoted ? String(pair[1].dropFirst().dropLast()) : pair[1]).lowercased()
            guard ["utf-8", "utf8", "us-ascii"].contains(charset) else { throw .unsupportedCharset(contentType) }
        }
    }
}

/// Compares two secrets in time that depends on their lengths only, not on where they differ.
func constantTimeEquals(_ lhs: String, _ rhs: String) -> Bool {
    let left = Array(lhs.utf8)
    let right = Array(rhs.utf8)
    var difference = UInt8(left.count == right.count ? 0 : 1)
    for index in 0..<max(left.count, right.count) {
        let a = index < left.count ? left[index] : 0
        let b = index < right.count ? right[index] : 0
        difference |= a ^ b
    }
    return difference == 0
}
