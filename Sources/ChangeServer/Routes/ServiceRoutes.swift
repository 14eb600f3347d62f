/// `GET /healthz` and `GET /metrics`.
extension App {
    func health() -> Response {
        .json(.ok) { $0.raw("{\"status\":\"ok\"}") }
    }

    func metricsText() -> Response {
        let text = metrics.render(
            .init(
                collections: registry.count, logLinesDropped: LogWriter.standardError.droppedLines,
                bodyBytesInFlight: bodyBudget.inUse, diskFreeBytes: diskSpace.freeBytes))
        return Response(
            .ok, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")], body: Array(text.utf8))
    }
}
