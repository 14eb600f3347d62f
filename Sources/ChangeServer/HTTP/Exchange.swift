import CHTTPD

/// One HTTP request, from libmicrohttpd's first call for it to its completion. It lives on the server's loop
/// thread only: MHD calls the access handler there, and the feed answers held exchanges there.
final class Exchange {
    let connection: OpaquePointer
    let method: String
    let path: String
    let started = MonotonicClock.now()
    var body: [UInt8] = []
    /// Bytes of a body larger than `--max-body-bytes` that were received and dropped.
    var droppedBodyBytes = 0
    /// The route template, for metrics (set once routed).
    var route = "unmatched"
    /// The response for a suspended exchange, queued when MHD calls the handler again after the resume.
    var pendingResponse: SharedResponse?
    var isSuspended = false
    /// Headers added to every response of this exchange (CORS), fixed when the request arrives.
    var extraHeaders: [(name: String, value: String)] = []

    init(connection: OpaquePointer, method: String, path: String) {
        self.connection = connection
        self.method = method
        self.path = path
    }

    /// A request header (case-insensitive); only while MHD is inside a call for this exchange.
    func header(_ name: String) -> String? {
        MHD_lookup_connection_value(connection, .HEADER_KIND, name).map { String(cString: $0) }
    }

    /// A raw (still percent-encoded) query argument; only while MHD is inside a call for this exchange.
    func rawQuery(_ name: String) -> String? {
        MHD_lookup_connection_value(connection, .GET_ARGUMENT_KIND, name).map { String(cString: $0) }
    }
}
