/// `GET /healthz` and `GET /metrics`.
extension App {
    func health() -> Response {
        guard let store = committer.storeState else { return .json(.ok) { $0.raw("{\"status\":\"ok\"}") } }
        let body = #"{"status":"ok","store":{"backend":"postgres","state":""# + store.rawValue + #""}}"#
        return .json(.ok) { $0.raw(Array(body.utf8)) }
    }

    func metricsText() -> Response {
        let shared = metrics.render(
            .init(
                collections: registry.count, logLinesDropped: LogWriter.standardError.droppedLines,
                bodyBytesInFlight: bodyBudget.inUse, diskFreeBytes: diskSpace?.freeBytes))
        let text = shared + committer.storeMetricsText()
        return Response(
            .ok, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")], body: Array(text.utf8))
    }
}
