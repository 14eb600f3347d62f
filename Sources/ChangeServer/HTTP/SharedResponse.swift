import CHTTPD
import Glibc
import Synchronization

/// One libmicrohttpd response, reference-counted by MHD, that can be queued on many connections: the long-poll
/// feed builds a changeset's bytes once and hands the same response to every subscriber waiting for it, and a
/// snapshot's response is shared by the reads of its version on every loop (MHD counts its references under a lock).
final class SharedResponse: Sendable {
    let status: HTTPStatus
    /// nonisolated(unsafe): the response is complete before it is first queued and never changed after; MHD
    /// counts the connections holding it under the response's own lock, so any loop may queue it.
    nonisolated(unsafe) fileprivate let pointer: OpaquePointer?
    /// False when MHD could not create the response or refused one of its headers: it must not be sent as it is.
    let isComplete: Bool
    /// Set when the body was too large for what is left of `--max-response-memory` (`ResponseBytes`): the response
    /// was not made, and the request gets `503` instead.
    let lackedMemory: Bool
    /// Bytes its headers take in a connection's memory pool, as `name: value\r\n`.
    let headerBytes: Int
    /// Whether it says `Connection: close`: MHD then closes the connection after it, which an answer sent outside
    /// MHD (`HTTPServer.answerDirectly`), whose connection is handed back open, would not.
    let closesConnection: Bool
    /// The response as it was asked for, from which `wire` is written.
    private let source: Response
    private let wireBytes = Mutex<[UInt8]?>(nil)

    /// The whole response as libmicrohttpd would send it on a keep-alive HTTP/1.1 connection (status line, `Date`,
    /// our headers, `Content-Length`, body), written on first use: a held poll answered outside MHD gets it in one
    /// `send` (`HTTPServer.answerDirectly`).
    var wire: [UInt8] {
        wireBytes.withLock { bytes in
            if let bytes { return bytes }
            let written = Self.wire(of: source)
            bytes = written
            return written
        }
    }

    /// `budget`: what a body larger than `ResponseBytes.countedSize` is counted against; nil for an answer that is
    /// not made per request (a changeset shared by every held poll), whose body libmicrohttpd copies.
    init(_ response: Response, budget: MemoryBudget? = nil) {
        status = response.status
        // Kept without its mark: a shared response's mark (`ResponseShare`) holds the response built for it, which
        // would then hold the mark, and neither would ever be freed. Every snapshot read (and `304`) leaked its
        // body twice over (ours and libmicrohttpd's copy): 7 MB per read of a 3.5 MB snapshot.
        var source = response
        source.share = nil
        self.source = source
        // As `HTTPError.closingTheConnection` writes it: compared as written, so that no response allocates for it.
        closesConnection = response.headers.contains { $0.name == "Connection" && $0.value == "close" }
        var lackedMemory = false
        let created: OpaquePointer?
        if let length = response.notModifiedLength {
            // A body of that size that is never read: libmicrohttpd sends no body with a `304`, but writes the
            // size it is given as the `Content-Length`.
            created = MHD_create_response_from_callback(UInt64(length), 1024, Self.neverRead, nil, nil)
        } else if let shared = response.sharedBody {
            created = shared.makeResponse()
        } else if let budget, response.body.count > ResponseBytes.countedSize {
            let bytes = ResponseBytes(copying: response.body, budget: budget)
            lackedMemory = bytes == nil
            created = bytes?.makeResponse()
        } else {
            created = response.body.withUnsafeBytes { body in
                MHD_create_response_from_buffer(
                    body.count, UnsafeMutableRawPointer(mutating: body.baseAddress), .RESPMEM_MUST_COPY)
            }
        }
        self.lackedMemory = lackedMemory
        pointer = created
        var complete = created != nil
        if let created {
            for header in response.headers {
                // withCString hands over a native string's own bytes; passing the strings would copy each into an array.
                complete =
                    complete
                    && header.name.withCString { name in
                        header.value.withCString { value in MHD_add_response_header(created, name, value) == .YES }
                    }
            }
        }
        isComplete = complete
        headerBytes = Self.headerBytes(of: response.headers)
    }

    /// The same response with `Connection: close`, for a loop that stops (`HTTPServer.isQuiesced`). A large body
    /// held apart (`ResponseBytes`) is shared, not copied; another is copied by libmicrohttpd, as when it was made.
    func closing() -> SharedResponse {
        var response = source
        response.headers.append(("Connection", "close"))
        return SharedResponse(response)
    }

    /// The body of a `304`, never asked for; were it asked, the connection would be closed.
    private static let neverRead: MHD_ContentReaderCallback = { _, _, _, _ in -2 }

    /// Bytes header lines take in a connection's memory pool, as `name: value\r\n`.
    static func headerBytes(of headers: [(name: String, value: String)]) -> Int {
        headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
    }

    /// Queues the response on a connection; MHD takes its own reference.
    func queue(on connection: OpaquePointer) -> Bool {
        guard let pointer else { return false }
        return MHD_queue_response(connection, UInt32(status.rawValue), pointer) == .YES
    }

    /// `HTTP/1.1 <code> <reason>\r\nDate: …\r\n<headers>Content-Length: <n>\r\n\r\n<body>`, in the order and
    /// spelling libmicrohttpd 0.9.75 uses (`build_header_response`); without the body for a `HEAD`.
    static func wire(of response: Response, includingBody: Bool = true) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256 + response.contentLength)
        bytes += "HTTP/1.1 ".utf8
        bytes.appendDecimal(response.status.rawValue)
        bytes.append(UInt8(ascii: " "))
        if let reason = MHD_get_reason_phrase_for(UInt32(response.status.rawValue)) {
            bytes += UnsafeRawBufferPointer(start: reason, count: strlen(reason))
        }
        bytes += "\r\nDate: ".utf8
        bytes += httpDate()
        bytes += "\r\n".utf8
        for header in response.headers {
            bytes += header.name.utf8
            bytes += ": ".utf8
            bytes += header.value.utf8
            bytes += "\r\n".utf8
        }
        bytes += "Content-Length: ".utf8
        bytes.appendDecimal(response.contentLength)
        bytes += "\r\n\r\n".utf8
        if includingBody {
            bytes += response.body
            if let shared = response.sharedBody { bytes += shared.bytes }
        }
        return bytes
    }

    /// The current time as an HTTP date (`Tue, 01 Dec 2026 00:54:24 GMT`), as MHD writes it.
    private static func httpDate() -> [UInt8] {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let text =
            "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
        return Array(text.utf8)
    }

    deinit {
        if let pointer { MHD_destroy_response(pointer) }
    }
}
