import Model
import Synchronization

/// The application: authentication, CORS, routing to the handlers in `Routes/`. It is shared by the workers
/// (one per event loop) and called on their threads; what it holds is immutable or behind locks.
final class App: Sendable {
    let config: Config
    let logger: Logger
    let metrics: Metrics
    let registry: Registry
    let journal: Journal
    let executor: Executor
    /// Snapshots and compaction of the journal.
    let storage: Storage
    private let shuttingDown = Atomic<Bool>(false)
    private let workerList = Mutex<[Worker]>([])

    init(config: Config, logger: Logger, metrics: Metrics, executor: Executor, journal: Journal, storage: Storage) {
        self.config = config
        self.logger = logger
        self.metrics = metrics
        self.executor = executor
        registry = executor.registry
        self.journal = journal
        self.storage = storage
    }

    var workers: [Worker] { workerList.withLock { $0 } }

    /// Adds a worker (before the loops start).
    func add(_ worker: Worker) {
        workerList.withLock { $0.append(worker) }
    }

    var isShuttingDown: Bool { shuttingDown.load(ordering: .acquiring) }

    /// Answers held polls with `503`, makes pending mutations durable and answers them, and stops accepting
    /// connections. Callable from any thread, once.
    func shutDown() {
        guard shuttingDown.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        logger.info("shutting down: answering \(metrics.heldPolls) held polls with 503")
        for worker in workers { worker.post { worker.feed.shutDown() } }
        journal.flush()
        for worker in workers { worker.post { worker.server.stop(grace: 2500) } }
    }

    /// Runs `task` with each worker on its own loop thread.
    func onEveryWorker(_ task: @escaping @Sendable (Worker) -> Void) {
        for worker in workers { worker.post { task(worker) } }
    }

    // MARK: Requests

    /// The CORS headers every response to this request carries.
    func corsHeaders(for exchange: Exchange) -> [(name: String, value: String)] {
        guard !config.corsOrigins.isEmpty, let origin = exchange.header("Origin"), isAllowed(origin: origin) else {
            return []
        }
        return [
            ("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
            ("Access-Control-Expose-Headers", "ETag, Retry-After"),
        ]
    }

    private func isAllowed(origin: String) -> Bool {
        config.corsOrigins.contains(origin) || config.corsOrigins.contains("*")
    }

    func handle(_ exchange: Exchange, on worker: Worker) -> HandlerResult {
        do throws(HTTPError) {
            guard let route = try Route.match(exchange.path) else {
                throw HTTPError(.notFound, code: "route_not_found", "No resource at \(exchange.path).")
            }
            exchange.route = route.template
            if exchange.method == "OPTIONS" {
                var response = preflight(exchange, route)
                if case .changes = route { response.headers.append(("Cache-Control", "no-store")) }
                return .respond(response)
            }
            guard route.methods.contains(exchange.method) else {
                throw HTTPError(
                    .methodNotAllowed, code: "method_not_allowed",
                    "\(exchange.method) is not allowed on \(route.template); allowed: \(route.methods.joined(separator: ", "))."
                )
                .with(header: "Allow", (route.methods + ["OPTIONS"]).joined(separator: ", "))
            }
            if isShuttingDown {
                throw HTTPError(
                    .serviceUnavailable, code: "shutting_down", "The server is shutting down; retry shortly."
                )
                .with(header: "Retry-After", "1")
            }
            try authorize(exchange, route)
            if ["PUT", "POST"].contains(exchange.method) { try checkContentType(exchange) }
            return try dispatch(exchange, route, worker)
        } catch {
            var response = Response.error(error)
            if Route.isFeedPath(exchange.path) { response.headers.append(("Cache-Control", "no-store")) }
            return .respond(response)
        }
    }

    private func dispatch(_ exchange: Exchange, _ route: Route, _ worker: Worker) throws(HTTPError) -> HandlerResult {
        let method = exchange.method == "HEAD" ? "GET" : exchange.method
        switch (route, method) {
        case (.health, _): return .respond(health())
        case (.metrics, _): return .respond(metricsText())
        case (.collections, _): return .respond(listCollections())
        case (.collection(let name), "GET"): return .respond(try snapshot(exchange, name))
        case (.collection(let name), "PUT"): return try replace(exchange, name, worker)
        case (.collection(let name), _): return try deleteCollection(exchange, name, worker)
        case (.mutations(let name), _): return try mutate(exchange, name, worker)
        case (.changes(let name), _): return try changes(exchange, name, worker)
        case (.item(let name, let id), "GET"): return .respond(try item(exchange, name, id))
        case (.item(let name, let id), "PUT"): return try upsertItem(exchange, name, id, worker)
        case (.item(let name, let id), _): return try deleteItem(exchange, name, id, worker)
        case (.asset(let path), _): return .respond(asset(exchange, path))
        }
    }

    // MARK: Cross-cutting checks

    private func preflight(_ exchange: Exchange, _ route: Route) -> Response {
        var headers: [(name: String, value: String)] = [
            ("Allow", (route.methods + ["OPTIONS"]).joined(separator: ", "))
        ]
        if !exchange.extraHeaders.isEmpty {
            headers += [
                ("Access-Control-Allow-Methods", (route.methods + ["OPTIONS"]).joined(separator: ", ")),
                ("Access-Control-Allow-Headers", "Authorization, Content-Type, If-Match, If-None-Match"),
                ("Access-Control-Max-Age", "600"),
            ]
        }
        return Response(.noContent, headers: headers)
    }

    /// Writes need the write token when one is set; reads need the read token or the write token when a read
    /// token is set. `/healthz` is always open, so that container health checks need no secret.
    private func authorize(_ exchange: Exchange, _ route: Route) throws(HTTPError) {
        guard route != .health else { return }
        if case .asset = route { return }
        let isWrite = !["GET", "HEAD"].contains(exchange.method)
        let accepted: [String]
        if isWrite {
            accepted = config.writeToken.map { [$0] } ?? []
        } else {
            accepted = config.readToken.map { [$0] + (config.writeToken.map { [$0] } ?? []) } ?? []
        }
        guard !accepted.isEmpty else { return }
        let presented = bearerToken(exchange.header("Authorization"))
        if let presented, accepted.contains(where: { constantTimeEquals($0, presented) }) { return }
        throw HTTPError(
            .unauthorized, code: "unauthorized",
            presented == nil
                ? "This request needs \"Authorization: Bearer <token>\"." : "The bearer token is not valid here."
        ).with(header: "WWW-Authenticate", "Bearer realm=\"changeserver\"")
    }

    private func bearerToken(_ header: String?) -> String? {
        guard let header, header.count > 7, header.prefix(7).lowercased() == "bearer " else { return nil }
        return String(header.dropFirst(7)).trimmingSpaces()
    }

    private func checkContentType(_ exchange: Exchange) throws(HTTPError) {
        guard let contentType = exchange.header("Content-Type") else { return }
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first.map {
            String($0).trimmingSpaces().lowercased()
        }
        guard mediaType == "application/json" else {
            throw HTTPError(
                .unsupportedMediaType, code: "unsupported_media_type",
                "Bodies are JSON: send Content-Type: application/json, not \(contentType)"
                    + (mediaType == "application/x-www-form-urlencoded"
                        ? " (curl -d sends that: use curl --json)." : "."))
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

extension String {
    /// Without leading and trailing spaces and tabs.
    func trimmingSpaces() -> String {
        let bytes = utf8
        guard let first = bytes.firstIndex(where: { $0 != 0x20 && $0 != 0x09 }),
            let last = bytes.lastIndex(where: { $0 != 0x20 && $0 != 0x09 })
        else { return "" }
        return String(self[first...last])
    }
}
