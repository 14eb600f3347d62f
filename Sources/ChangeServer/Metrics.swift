import Synchronization

/// The counters and gauges `/metrics` exposes in Prometheus' text format.
final class Metrics: Sendable {
    private struct RequestKey: Hashable {
        var method: String
        var route: String
        var status: Int
    }

    private struct State {
        var requests: [RequestKey: Int] = [:]
        var mutations = 0
        var heldPolls = 0
        var openStreams = 0
        var streamsCut = 0
        var changesetsDelivered = 0
        var pollTimeouts = 0
        var journalBytes = 0
        var responseFailures = 0
        var quickReads = 0
        var writesRefusedForDisk = 0
        var connectionLimitReached = 0
        var cursorsBehindHistory = 0
        /// Cumulative fsync latency histogram: counts per upper bound (seconds), plus sum and count.
        var fsyncBuckets = [Int](repeating: 0, count: Metrics.fsyncBounds.count)
        var fsyncSum = 0.0
        var fsyncCount = 0
    }

    static let fsyncBounds: [Double] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]

    private let state = Mutex(State())

    /// Counts a request. Methods other than the six the server answers count as `other`, so that clients
    /// cannot grow the number of series (nor put quotes into a label).
    func request(method: String, route: String, status: Int, count: Int = 1) {
        let label = Self.label(method)
        state.withLock { $0.requests[RequestKey(method: label, route: route, status: status), default: 0] += count }
    }

    private static func label(_ method: String) -> String {
        switch method {
        case "GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS": method
        default: "other"
        }
    }

    func mutationCommitted() { state.withLock { $0.mutations += 1 } }
    /// Polls held right now by all workers together: the gauge, and what `--max-held-polls` is checked against.
    var heldPolls: Int { state.withLock { $0.heldPolls } }
    func adjustHeldPolls(by change: Int) { state.withLock { $0.heldPolls += change } }
    /// Event streams open right now; with the held polls, what `--max-held-polls` is checked against.
    var openStreams: Int { state.withLock { $0.openStreams } }
    func adjustOpenStreams(by change: Int) { state.withLock { $0.openStreams += change } }
    func streamCut() { state.withLock { $0.streamsCut += 1 } }
    /// Held polls and open streams together: each holds a connection until something commits.
    var heldConnections: Int { state.withLock { $0.heldPolls + $0.openStreams } }
    func changesetsDelivered(_ count: Int) { state.withLock { $0.changesetsDelivered += count } }
    func pollsTimedOut(_ count: Int) { state.withLock { $0.pollTimeouts += count } }
    func setJournalBytes(_ bytes: Int) { state.withLock { $0.journalBytes = bytes } }
    func responseFailed() { state.withLock { $0.responseFailures += 1 } }
    func quickReadsAnswered(_ count: Int) { state.withLock { $0.quickReads += count } }
    func writeRefusedForDisk() { state.withLock { $0.writesRefusedForDisk += 1 } }
    func connectionLimitReached() { state.withLock { $0.connectionLimitReached += 1 } }
    func cursorBehindHistory() { state.withLock { $0.cursorsBehindHistory += 1 } }

    func fsyncTook(seconds: Double) {
        state.withLock { state in
            for (index, bound) in Self.fsyncBounds.enumerated() where seconds <= bound {
                state.fsyncBuckets[index] += 1
            }
            state.fsyncSum += seconds
            state.fsyncCount += 1
        }
    }

    /// What `render` reads from elsewhere at the moment of the scrape.
    struct Gauges {
        var collections: Int
        var logLinesDropped: Int
        var bodyBytesInFlight: Int
        var responseBytesHeld: Int
        var diskFreeBytes: Int?
        var connectionsOpen = 0
        var residentBytes = 0
    }

    /// The exposition text, with the gauges read at the moment of the scrape.
    func render(_ gauges: Gauges) -> String {
        let snapshot = state.withLock { $0 }
        var lines: [String] = []
        func metric(_ name: String, _ type: String, _ help: String) {
            lines.append("# HELP \(name) \(help)")
            lines.append("# TYPE \(name) \(type)")
        }
        metric("changeserver_build_info", "gauge", "Always 1; its label is the release this server runs (--version).")
        lines.append("changeserver_build_info{version=\"\(Release.version)\"} 1")
        metric("changeserver_requests_total", "counter", "HTTP requests answered, by method, route and status.")
        for (key, count) in snapshot.requests.sorted(by: {
            ($0.key.route, $0.key.method, $0.key.status) < ($1.key.route, $1.key.method, $1.key.status)
        }) {
            lines.append(
                "changeserver_requests_total{method=\"\(key.method)\",route=\"\(key.route)\",status=\"\(key.status)\"} \(count)"
            )
        }
        metric(
            "changeserver_mutations_total", "counter",
            "Mutations committed (that changed something); with --postgres, every server's, which each applies.")
        lines.append("changeserver_mutations_total \(snapshot.mutations)")
        metric("changeserver_held_polls", "gauge", "Long polls held right now.")
        lines.append("changeserver_held_polls \(snapshot.heldPolls)")
        metric("changeserver_streams_open", "gauge", "Event streams (text/event-stream) of the feed open right now.")
        lines.append("changeserver_streams_open \(snapshot.openStreams)")
        metric("changeserver_streams_cut_total", "counter", "Event streams closed because their reader fell behind.")
        lines.append("changeserver_streams_cut_total \(snapshot.streamsCut)")
        metric(
            "changeserver_changesets_delivered_total", "counter",
            "Changesets answered on the change feed that move a client to a newer version.")
        lines.append("changeserver_changesets_delivered_total \(snapshot.changesetsDelivered)")
        metric(
            "changeserver_cursors_behind_history_total", "counter",
            "Polls and streams from a version of the current epoch older than the kept history (--history, "
                + "--history-bytes): each was answered 410, and its client reloads a snapshot.")
        lines.append("changeserver_cursors_behind_history_total \(snapshot.cursorsBehindHistory)")
        metric("changeserver_poll_timeouts_total", "counter", "Long polls answered empty at their timeout.")
        lines.append("changeserver_poll_timeouts_total \(snapshot.pollTimeouts)")
        metric("changeserver_collections", "gauge", "Collections held.")
        lines.append("changeserver_collections \(gauges.collections)")
        metric("changeserver_journal_bytes", "gauge", "Bytes in the journal since the last snapshot.")
        lines.append("changeserver_journal_bytes \(snapshot.journalBytes)")
        metric("changeserver_fsync_seconds", "histogram", "Latency of the journal's fsync calls.")
        for (index, bound) in Self.fsyncBounds.enumerated() {
            lines.append("changeserver_fsync_seconds_bucket{le=\"\(bound)\"} \(snapshot.fsyncBuckets[index])")
        }
        lines.append("changeserver_fsync_seconds_bucket{le=\"+Inf\"} \(snapshot.fsyncCount)")
        lines.append("changeserver_fsync_seconds_sum \(snapshot.fsyncSum)")
        lines.append("changeserver_fsync_seconds_count \(snapshot.fsyncCount)")
        metric(
            "changeserver_response_failures_total", "counter",
            "Responses that could not be sent as they were (headers that do not fit the connection next to the "
                + "request's, or refused by libmicrohttpd), answered 431 or 500 instead, or closed.")
        lines.append("changeserver_response_failures_total \(snapshot.responseFailures)")
        metric(
            "changeserver_quick_reads_total", "counter",
            "Snapshot reads answered with the shared response from the request line, before routing.")
        lines.append("changeserver_quick_reads_total \(snapshot.quickReads)")
        metric(
            "changeserver_log_lines_dropped_total", "counter",
            "Request log lines dropped because stderr did not keep up.")
        lines.append("changeserver_log_lines_dropped_total \(gauges.logLinesDropped)")
        metric("changeserver_connections_open", "gauge", "Client connections open now, on every event loop.")
        lines.append("changeserver_connections_open \(gauges.connectionsOpen)")
        metric(
            "changeserver_connection_limit_reached_total", "counter",
            "Connections that took an event loop to its share of --max-connections (new ones then wait).")
        lines.append("changeserver_connection_limit_reached_total \(snapshot.connectionLimitReached)")
        metric("changeserver_body_bytes_in_flight", "gauge", "Bytes of request bodies held in memory now.")
        lines.append("changeserver_body_bytes_in_flight \(gauges.bodyBytesInFlight)")
        metric(
            "changeserver_response_bytes_held", "gauge",
            "Bytes of answers over 1 MiB held in memory until their clients take them (--max-response-memory).")
        lines.append("changeserver_response_bytes_held \(gauges.responseBytesHeld)")
        metric(
            "changeserver_writes_refused_disk_total", "counter",
            "Writes refused because the free space of --data-dir was below --disk-reserve-bytes.")
        lines.append("changeserver_writes_refused_disk_total \(snapshot.writesRefusedForDisk)")
        metric("process_resident_memory_bytes", "gauge", "Resident memory of the server's process, in bytes.")
        lines.append("process_resident_memory_bytes \(gauges.residentBytes)")
        if let free = gauges.diskFreeBytes {
            metric("changeserver_disk_free_bytes", "gauge", "Free bytes in the file system of --data-dir.")
            lines.append("changeserver_disk_free_bytes \(free)")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
