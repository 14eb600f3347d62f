import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One HTTP/1.1 request over a connection of its own (`Connection: close`), for `http://` URLs on Linux, where
/// FoundationNetworking (libcurl) traps on an answer cut inside its headers ("Transfer completed, but there's no
/// response"), sends a request again on its own when a kept-alive connection dies before the answer (a `DELETE`
/// applied twice, reported refused; a `POST` sent again without its body), and spins a core while a connection is
/// accepted but never answered. Here a request is sent once, on a new connection, and every failure is an error.
///
/// The request runs on a thread of its own, blocked in `poll` on the socket and on a pipe that cancelling the
/// calling task writes to: it waits without spinning, and ends at once when cancelled (but during the name's
/// lookup, which `getaddrinfo` does without a way to stop it, within the system resolver's own timeout).
enum SocketHTTP {
    /// A request that did not get a whole answer.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Whether requests to `url` go this way: plain HTTP (TLS is left to URLSession).
    static func handles(_ url: URL) -> Bool { url.scheme?.lowercased() == "http" && url.host != nil }

    /// Sends the request and returns its answer; throws `CancellationError` when the calling task is cancelled,
    /// `NotSent` when no connection could be made (or the task was cancelled while making it), `Failure` when no
    /// whole answer came, or nothing came for `timeout` (between two bytes, as URLSession's
    /// `timeoutInterval`: a large answer on a slow link is not cut at a total).
    static func send(
        _ method: String, _ url: URL, headers: [(String, String)], body: [UInt8]?, timeout: Duration
    ) async throws -> HTTPAnswer {
        let cancel = try CancelSignal()
        // An hour at most: a longer one (`.seconds(Int64.max)` for "no timeout") would overflow in milliseconds.
        let timeout = min(max(timeout, .zero), .seconds(3600))
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPAnswer, Error>) in
                let thread = Thread {
                    defer { cancel.close() }
                    do {
                        let exchange = Exchange(cancel: cancel, timeout: timeout)
                        continuation.resume(
                            returning: try exchange.run(method, url, headers: headers, body: body))
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
                thread.start()
            }
        } onCancel: {
            cancel.fire()
        }
    }

    /// A pipe whose read end becomes readable once the request is cancelled.
    final class CancelSignal: @unchecked Sendable {
        // @unchecked: the descriptors are set once; `fired` and `closed` are read and written under `lock`.
        let readEnd: Int32
        private let writeEnd: Int32
        private let lock = NSLock()
        private var closed = false
        private var fired = false

        init() throws {
            var ends: [Int32] = [0, 0]
            guard pipe(&ends) == 0 else { throw Failure(description: "no pipe: \(String(cString: strerror(errno)))") }
            readEnd = ends[0]
            writeEnd = ends[1]
            // Not inherited by a program the app starts meanwhile.
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        }

        var isFired: Bool { lock.withLock { fired } }

        func fire() {
            lock.withLock {
                guard !closed, !fired else { return }
                fired = true
                var byte: UInt8 = 1
                _ = write(writeEnd, &byte, 1)
            }
        }

        func close() {
            lock.withLock {
                guard !closed else { return }
                closed = true
                _ = Foundation.close(readEnd)
                _ = Foundation.close(writeEnd)
            }
        }
    }

    /// The work of one request, on its thread.
    private final class Exchange {
        let cancel: CancelSignal
        let timeout: Duration
        /// When the request gives up, unless bytes come or go before: moved on by each.
        private var deadline: ContinuousClock.Instant
        /// The buffer every `recv` reads into, allocated once.
        private var chunk = [UInt8](repeating: 0, count: 64 * 1024)

        init(cancel: CancelSignal, timeout: Duration) {
            self.cancel = cancel
            self.timeout = timeout
            deadline = .now + timeout
        }

        func run(_ method: String, _ url: URL, headers: [(String, String)], body: [UInt8]?) throws -> HTTPAnswer {
            guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false), let host = url.host
            else { throw Failure(description: "not an http URL: \(url)") }
            let port = url.port ?? 80
            let socket: Int32
            do {
                socket = try connect(host: host, port: port)
            } catch is CancellationError {
                throw NotSent(description: "cancelled while connecting", cancelled: true)
            } catch {
                throw NotSent(description: String(describing: error), cancelled: false)
            }
            defer { _ = Foundation.close(socket) }
            var target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
            if let query = components.percentEncodedQuery { target += "?" + query }
            let hostHeader = (host.contains(":") ? "[\(host)]" : host) + (url.port.map { ":\($0)" } ?? "")
            var head = "\(method) \(target) HTTP/1.1\r\nHost: \(hostHeader)\r\nConnection: close\r\n"
            for (name, value) in headers { head += "\(name): \(value)\r\n" }
            if let body { head += "Content-Length: \(body.count)\r\n" }
            head += "\r\n"
            try sendAll(Array(head.utf8) + (body ?? []), on: socket)
            return try readAnswer(from: socket, isHead: method == "HEAD")
        }

        /// Waits until `socket` is ready for `events`; throws when cancelled or past the deadline.
        private func wait(_ socket: Int32, for events: Int16) throws {
            while true {
                if cancel.isFired { throw CancellationError() }
                let left = ContinuousClock.now.duration(to: deadline)
                guard left > .zero else { throw Failure(description: "no answer within the request's timeout") }
                let milliseconds = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000
                var fds = [
                    pollfd(fd: socket, events: events, revents: 0),
                    pollfd(fd: cancel.readEnd, events: Int16(POLLIN), revents: 0),
                ]
                let ready = poll(&fds, 2, Int32(min(milliseconds + 1, Int64(Int32.max))))
                if ready < 0 && errno != EINTR {
                    throw Failure(description: "poll: \(String(cString: strerror(errno)))")
                }
                if fds[1].revents != 0 { throw CancellationError() }
                if fds[0].revents != 0 { return }
            }
        }

        private func connect(host: String, port: Int) throws -> Int32 {
            var hints = addrinfo()
            hints.ai_family = AF_UNSPEC
            #if canImport(Glibc)
                hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            #else
                hints.ai_socktype = SOCK_STREAM
            #endif
            var found: UnsafeMutablePointer<addrinfo>?
            let status = getaddrinfo(host, String(port), &hints, &found)
            guard status == 0, let first = found else {
                throw Failure(description: "cannot resolve \(host): \(String(cString: gai_strerror(status)))")
            }
            defer { freeaddrinfo(first) }
            var failure = "no address for \(host)"
            var next: UnsafeMutablePointer<addrinfo>? = first
            while let address = next {
                next = address.pointee.ai_next
                let socket = Foundation.socket(address.pointee.ai_family, address.pointee.ai_socktype, 0)
                guard socket >= 0 else { continue }
                _ = fcntl(socket, F_SETFD, FD_CLOEXEC)
                _ = fcntl(socket, F_SETFL, fcntl(socket, F_GETFL) | O_NONBLOCK)
                var noSignal: Int32 = 1
                #if canImport(Darwin)
                    _ = setsockopt(socket, SOL_SOCKET, SO_NOSIGPIPE, &noSignal, socklen_t(MemoryLayout<Int32>.size))
                #else
                    _ = noSignal
                #endif
                if Foundation.connect(socket, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0
                    || errno == EINPROGRESS
                {
                    do {
                        try wait(socket, for: Int16(POLLOUT))
                        var error: Int32 = 0
                        var length = socklen_t(MemoryLayout<Int32>.size)
                        _ = getsockopt(socket, SOL_SOCKET, SO_ERROR, &error, &length)
                        if error == 0 { return socket }
                        failure = "cannot connect to \(host):\(port): \(String(cString: strerror(error)))"
                    } catch {
                        _ = Foundation.close(socket)
                        throw error
                    }
                } else {
                    failure = "cannot connect to \(host):\(port): \(String(cString: strerror(errno)))"
                }
                _ = Foundation.close(socket)
            }
            throw Failure(description: failure)
        }

        private func sendAll(_ bytes: [UInt8], on socket: Int32) throws {
            var offset = 0
            while offset < bytes.count {
                try wait(socket, for: Int16(POLLOUT))
                let sent = bytes.withUnsafeBytes { buffer in
                    #if canImport(Glibc)
                        Foundation.send(socket, buffer.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                    #else
                        Foundation.send(socket, buffer.baseAddress! + offset, bytes.count - offset, 0)
                    #endif
                }
                if sent < 0 {
                    guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                        throw Failure(
                            description: "the connection failed while sending: \(String(cString: strerror(errno)))")
                    }
                    continue
                }
                offset += sent
                deadline = .now + timeout
            }
        }

        /// Reads more bytes into `buffer`; false at the end of the stream.
        private func receive(from socket: Int32, into buffer: inout [UInt8]) throws -> Bool {
            while true {
                try wait(socket, for: Int16(POLLIN))
                let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
                if count > 0 {
                    buffer += chunk[..<count]
                    deadline = .now + timeout
                    return true
                }
                if count == 0 { return false }
                guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                    throw Failure(description: "the connection failed: \(String(cString: strerror(errno)))")
                }
            }
        }

        private func readAnswer(from socket: Int32, isHead: Bool) throws -> HTTPAnswer {
            var bytes: [UInt8] = []
            var lines: [String] = []
            var status = 0
            // Interim answers (`100 Continue`, `103 Early Hints`) come before the final one: they are passed over.
            repeat {
                var searched = 0
                var headEnd: Int?
                while true {
                    headEnd = Self.find([13, 10, 13, 10], in: bytes, from: searched)
                    if headEnd != nil { break }
                    searched = Swift.max(0, bytes.count - 3)
                    guard try receive(from: socket, into: &bytes) else {
                        throw Failure(description: "the connection closed before the answer's headers were whole")
                    }
                    if bytes.count > 1 << 20 { throw Failure(description: "an answer's headers over 1 MiB") }
                }
                let end = headEnd ?? 0
                lines = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
                bytes.removeFirst(end + 4)
                let statusParts = lines[0].split(separator: " ", maxSplits: 2)
                guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let code = Int(statusParts[1]),
                    (100...599).contains(code)
                else { throw Failure(description: "not an HTTP/1.1 answer: \(lines[0].prefix(80))") }
                status = code
            } while (100..<200).contains(status) && status != 101
            var fields: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let name = line[..<colon].lowercased()
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                fields[name] = fields[name].map { $0 + ", " + value } ?? value
            }
            var body = bytes
            if isHead || status == 204 || status == 304 || (100..<200).contains(status) {
                body = []
            } else if fields["transfer-encoding"]?.lowercased().contains("chunked") == true {
                body = try readChunked(body, from: socket)
            } else if fields["transfer-encoding"] == nil, let text = fields["content-length"] {
                guard let length = Int(text), length >= 0, text.allSatisfy({ ("0"..."9").contains($0) }) else {
                    throw Failure(description: "a Content-Length that is not one: \(text.prefix(40))")
                }
                while body.count < length {
                    guard try receive(from: socket, into: &body) else {
                        throw Failure(description: "the connection closed \(body.count) bytes into a body of \(length)")
                    }
                }
                body.removeLast(body.count - length)
            } else {
                while try receive(from: socket, into: &body) {}
            }
            let retryAfter = fields["retry-after"].flatMap { Int($0) }.map {
                Duration.seconds(min(max($0, 0), HTTPAnswer.longestRetryAfter))
            }
            return HTTPAnswer(status: status, retryAfter: retryAfter, body: Data(body))
        }

        /// Decodes a chunked body, reading the rest of it from `socket`.
        private func readChunked(_ start: [UInt8], from socket: Int32) throws -> [UInt8] {
            var bytes = start
            var offset = 0
            var body: [UInt8] = []
            while true {
                var lineEnd = Self.find([13, 10], in: bytes, from: offset)
                while lineEnd == nil {
                    guard try receive(from: socket, into: &bytes) else {
                        throw Failure(description: "the connection closed inside a chunked body")
                    }
                    lineEnd = Self.find([13, 10], in: bytes, from: offset)
                }
                let sizeText = String(decoding: bytes[offset..<(lineEnd ?? offset)], as: UTF8.self)
                let digits = (sizeText.split(separator: ";", omittingEmptySubsequences: false).first ?? "")
                    .trimmingCharacters(in: .whitespaces)
                // At most 15 hexadecimal digits: a size that fits, with room for what is added to it.
                guard !digits.isEmpty, digits.count <= 15, digits.allSatisfy(\.isHexDigit),
                    let size = Int(digits, radix: 16)
                else { throw Failure(description: "a chunk size that is not one: \(sizeText.prefix(20))") }
                offset = (lineEnd ?? offset) + 2
                if size == 0 { return body }
                while bytes.count < offset + size + 2 {
                    guard try receive(from: socket, into: &bytes) else {
                        throw Failure(description: "the connection closed inside a chunk")
                    }
                }
                guard bytes[offset + size] == 13, bytes[offset + size + 1] == 10 else {
                    throw Failure(description: "a chunk not ended by CRLF")
                }
                body += bytes[offset..<(offset + size)]
                offset += size + 2
            }
        }

        private static func find(_ marker: [UInt8], in bytes: [UInt8], from start: Int = 0) -> Int? {
            guard bytes.count >= marker.count, start <= bytes.count - marker.count else { return nil }
            for index in start...(bytes.count - marker.count) where bytes[index] == marker[0] {
                if bytes[index..<(index + marker.count)].elementsEqual(marker) { return index }
            }
            return nil
        }
    }
}
