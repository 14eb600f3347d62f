import Foundation
import ProcessSupport

/// An HTTP response as the tests see it.
struct HTTPResponse {
    var status: Int
    /// Lines of one name joined with ", ", as HTTP reads them.
    var headers: [String: String]
    var body: [UInt8]
    /// How many lines each header name (lowercased) came on.
    var headerLineCounts: [String: Int] = [:]

    func header(_ name: String) -> String? { headers[name.lowercased()] }

    var text: String { String(decoding: body, as: UTF8.self) }

    /// The body parsed as JSON.
    var json: Any? { try? JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed]) }
    var object: [String: Any] { json as? [String: Any] ?? [:] }

    /// `error.code` of an error body.
    var errorCode: String? { (object["error"] as? [String: Any])?["code"] as? String }
}

enum ClientError: Error {
    case connect(Int32)
    case closedEarly(String)
    case malformed(String)
}

/// One TCP connection to the server on loopback, speaking HTTP/1.1 by hand so that the tests control every
/// byte (malformed bodies, odd headers, requests left waiting).
final class HTTPConnection {
    private(set) var descriptor: Int32
    private var buffer: [UInt8] = []

    /// `receiveBuffer` sets the socket's receive buffer (bytes, before it connects): a small one makes the server's
    /// sends meet a full socket soon.
    init(port: Int, receiveTimeout: Double = 15, receiveBuffer: Int32? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var size = receiveBuffer {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else {
            let error = errno
            close()
            throw ClientError.connect(error)
        }
        var timeout = timeval(
            tv_sec: Int(receiveTimeout), tv_usec: Int((receiveTimeout - Double(Int(receiveTimeout))) * 1e6))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close() }

    /// The connection's own port on loopback.
    var localPort: Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Shuts down the sending side (a half-close): the server reads the end of the request stream, and this side
    /// can still read.
    func shutdownWriting() {
        _ = Glibc.shutdown(descriptor, Int32(SHUT_WR))
    }

    /// Closes the connection (once).
    func close() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
    }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if written <= 0 { return }
            offset += written
        }
    }

    /// Sends a request; `Content-Length` is added when there is a body.
    func sendRequest(
        _ method: String, _ path: String, headers: [String: String] = [:], body: [UInt8]? = nil, close: Bool = false
    ) {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        if close { head += "Connection: close\r\n" }
        head += "\r\n"
        send(Array(head.utf8) + (body ?? []))
    }

    /// Reads one response (Content-Length framed, or to the end of the connection).
    func readResponse(method: String = "GET") throws -> HTTPResponse {
        let headerEnd = try readUntil([13, 10, 13, 10])
        let head = String(decoding: buffer[..<headerEnd], as: UTF8.self)
        buffer.removeFirst(headerEnd + 4)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw ClientError.malformed(head) }
        var headers: [String: String] = [:]
        var lineCounts: [String: Int] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[name] = headers[name].map { $0 + ", " + value } ?? value
            lineCounts[name, default: 0] += 1
        }
        var body: [UInt8] = []
        if method == "HEAD" || status < 200 || status == 204 || status == 304 {
        } else if let length = headers["content-length"].flatMap(Int.init) {
            while buffer.count < length { guard try fill() else { throw ClientError.closedEarly(head) } }
            body = Array(buffer[..<length])
            buffer.removeFirst(length)
        } else if headers["transfer-encoding"]?.lowercased() == "chunked" {
            body = try readChunked()
        } else {
            while try fill() {}
            body = buffer
            buffer = []
        }
        return HTTPResponse(status: status, headers: headers, body: body, headerLineCounts: lineCounts)
    }

    private func readChunked() throws -> [UInt8] {
        var body: [UInt8] = []
        while true {
            let lineEnd = try readUntil([13, 10])
            let sizeText = String(decoding: buffer[..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            buffer.removeFirst(lineEnd + 2)
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                throw ClientError.malformed("chunk size")
            }
            while buffer.count < size + 2 { guard try fill() else { throw ClientError.closedEarly("chunk") } }
            body += buffer[..<size]
            buffer.removeFirst(size + 2)
            if size == 0 { return body }
        }
    }

    private func readUntil(_ marker: [UInt8]) throws -> Int {
        var searchFrom = 0
        while true {
            if buffer.count >= marker.count {
                for start in searchFrom...(buffer.count - marker.count)
                where buffer[start..<start + marker.count].elementsEqual(marker) {
                    return start
                }
                searchFrom = max(0, buffer.count - marker.count + 1)
            }
            guard try fill() else { throw ClientError.closedEarly(String(decoding: buffer, as: UTF8.self)) }
        }
    }

    /// Reads more bytes; false at the end of the connection.
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = recv(descriptor, &chunk, chunk.count, 0)
        if count < 0 { throw ClientError.closedEarly("recv errno \(errno)") }
        if count == 0 { return false }
        buffer += chunk[..<count]
        return true
    }

    /// Bytes received and not read by a `readResponse` yet.
    var unreadByteCount: Int { buffer.count }

    /// Whether something (bytes, or the end of the connection) can be read within `seconds`.
    func isReadable(within seconds: Double) -> Bool {
        guard buffer.isEmpty else { return true }
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&poller, 1, Int32(seconds * 1000)) > 0
    }

    /// Whether the server closed the connection (without sending anything more) within `seconds`.
    func isClosed(within seconds: Double) -> Bool {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(seconds * 1000)) > 0 else { return false }
        var byte: UInt8 = 0
        return recv(descriptor, &byte, 1, Int32(MSG_PEEK)) == 0
    }
}

/// The tests' view of one running server: one request per connection.
struct Client {
    let port: Int
    var headers: [String: String] = [:]
    /// How long one read of an answer may wait: longer for bodies of megabytes, which a debug build on a loaded
    /// machine can take longer than the usual 15 s to make.
    var receiveTimeout: Double = 15

    func request(
        _ method: String, _ path: String, headers: [String: String] = [:], body: [UInt8]? = nil
    ) throws -> HTTPResponse {
        let connection = try HTTPConnection(port: port, receiveTimeout: receiveTimeout)
        connection.sendRequest(method, path, headers: self.headers.merging(headers) { $1 }, body: body, close: true)
        return try connection.readResponse(method: method)
    }

    func get(_ path: String, headers: [String: String] = [:]) throws -> HTTPResponse {
        try request("GET", path, headers: headers)
    }

    func send(_ method: String, _ path: String, json: Any, headers: [String: String] = [:]) throws -> HTTPResponse {
        let body = try JSONSerialization.data(withJSONObject: json, options: [.fragmentsAllowed])
        return try request(
            method, path, headers: ["Content-Type": "application/json"].merging(headers) { $1 }, body: Array(body))
    }

    func put(_ path: String, _ json: Any, headers: [String: String] = [:]) throws -> HTTPResponse {
        try send("PUT", path, json: json, headers: headers)
    }

    func post(_ path: String, _ json: Any, headers: [String: String] = [:]) throws -> HTTPResponse {
        try send("POST", path, json: json, headers: headers)
    }

    /// `POST /v1/collections/{name}/mutations` with these ops.
    func mutate(_ name: String, _ ops: [[String: Any]], headers: [String: String] = [:]) throws -> HTTPResponse {
        try post("/v1/collections/\(name)/mutations", ["ops": ops], headers: headers)
    }
}

extension ServerProcess {
    /// A connection's worth of requests to this server.
    var client: Client { Client(port: port) }

    /// How many times `text` stands in this server's log so far.
    func logCount(of text: String) -> Int { log.components(separatedBy: text).count - 1 }

    /// The value of the unlabelled metric `name` in this server's `/metrics`, or nil when it has none.
    func metric(_ name: String) throws -> Int? {
        let line = try client.get("/metrics").text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") }
    }
}
