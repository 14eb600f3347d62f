/// `GET /healthz` and `GET /metrics`.
extension App {
    /// `200` while the server serves, also when its store takes no writes (reads and feeds go on): the body says
    /// so, for a probe or a person to see why writes get `503`: a file journal below its disk reserve (`full`) or
    /// whose writes fail (`down`), or PostgreSQL `up` or `down`.
    func health() -> Response {
        let backend = config.postgres == nil ? "file" : "postgres"
        let state = diskSpace.map { $0.allowsWrites } == false ? "full" : committer.storeState?.rawValue
        guard let state else { return .json(.ok) { $0.raw("{\"status\":\"ok\"}") } }
        let body = #"{"status":"ok","store":{"backend":""# + backend + #"","state":""# + state + #""}}"#
        return .json(.ok) { $0.raw(Array(body.utf8)) }
    }

    func metricsText() -> Response {
        let shared = metrics.render(
            .init(
                collections: registry.count, logLinesDropped: LogWriter.standardError.droppedLines,
                bodyBytesInFlight: bodyBudget.inUse, responseBytesHeld: responseBudget.inUse,
                diskFreeBytes: diskSpace?.freeBytes,
                connectionsOpen: workers.reduce(0) { $0 + $1.server.openConnections.load(ordering: .relaxed) },
                residentBytes: MemoryTrimmer.residentBytes()))
        let text = shared + committer.storeMetricsText()
        return Response(
            .ok, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")], body: Array(text.utf8))
    }
}
