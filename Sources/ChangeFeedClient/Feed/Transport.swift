import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One HTTP answer: status, the headers the loop reads, and the body.
struct HTTPAnswer: Sendable {
    var status: Int
    var retryAfter: Duration?
    var body: Data
}

/// A request that never left: no connection could be made, or the task was cancelled before any of it went. Only
/// `SocketHTTP`, which opens a connection of its own for each request, can tell: a `URLSession` may send a request
/// on a kept connection that dies unanswered, then send it again on a new one, and a refused connect then ends a
/// request the server may have applied (libcurl's `cannotConnectToHost` after a `POST` the server had read).
struct NotSent: Error, CustomStringConvertible {
    let description: String
    let cancelled: Bool
}

/// Requests through `URLSession`, or on Linux through a connection of their own (`SocketHTTP`), each cancelled at
/// once when the task awaiting it is cancelled (a held poll is a request the server may keep for minutes).
struct Transport: Sendable {
    let session: URLSession
    /// Whether `http://` requests go through `SocketHTTP` rather than `session`.
    var usesSockets = false

    /// - Throws: `CancellationError` when the calling task is cancelled, or the session's error.
    func get(_ url: URL, token: String?, timeout: Duration) async throws -> HTTPAnswer {
        try await send("GET", url, token: token, timeout: timeout)
    }

    /// Why `token` cannot be sent as `Authorization: Bearer <token>`, if it cannot: a control character (a line
    /// break would end the header and start another, or the request), or a blank at an end (which a header's
    /// value drops). The server takes the same tokens (`--write-token`). An empty token is sent as none.
    static func problem(withToken token: String) -> String? {
        if token.utf8.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
            return "the token holds a control character (a line break, say), which a header cannot carry"
        }
        if let first = token.utf8.first, let last = token.utf8.last,
            [0x20, 0x09].contains(first) || [0x20, 0x09].contains(last)
        {
            return "the token starts or ends with a blank, which a header drops"
        }
        return nil
    }

    /// Sends a request; `body` is JSON (`Content-Type: application/json`).
    /// - Throws: `CancellationError` when the calling task is cancelled, `NotSent` (through `SocketHTTP` only)
    ///   when no connection could be made or the task was cancelled while making it, or the session's error.
    func send(
        _ method: String, _ url: URL, token: String?, body: [UInt8]? = nil, headers: [(String, String)] = [],
        timeout: Duration
    ) async throws -> HTTPAnswer {
        if usesSockets, SocketHTTP.handles(url) {
            var lines = [("Accept", "application/json")]
            if let token, !token.isEmpty { lines.append(("Authorization", "Bearer \(token)")) }
            if body != nil { lines.append(("Content-Type", "application/json")) }
            return try await SocketHTTP.send(
                method, url, headers: lines + headers, body: body, timeout: timeout + .seconds(1))
        }
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.timeoutInterval = Double(timeout.components.seconds) + 1
        request.cachePolicy = .reloadIgnoringLocalCacheData
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let token, !token.isEmpty { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpBody = Data(body)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let pending = PendingRequest()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPAnswer, Error>) in
                let task = session.dataTask(with: request) { data, response, error in
                    if let error {
                        continuation.resume(throwing: pending.isCancelled ? CancellationError() : error)
                        return
                    }
                    guard let response = response as? HTTPURLResponse else {
                        continuation.resume(throwing: URLError(.badServerResponse))
                        return
                    }
                    continuation.resume(returning: HTTPAnswer(response: response, body: data ?? Data()))
                }
                pending.start(task)
            }
        } onCancel: {
            pending.cancel()
        }
    }
}

extension HTTPAnswer {
    /// The longest `Retry-After` honoured, in seconds: a larger one (a proxy's mistake) is taken as an hour, and
    /// one past `Duration`'s range would trap in `Task.sleep`.
    static let longestRetryAfter = 3600

    init(response: HTTPURLResponse, body: Data) {
        status = response.statusCode
        let header = response.value(forHTTPHeaderField: "Retry-After")
        retryAfter = header.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.map {
            .seconds(min(max($0, 0), Self.longestRetryAfter))
        }
        self.body = body
    }
}

/// The task of one request, and whether it was cancelled, which may happen before the task exists.
private final class PendingRequest: @unchecked Sendable {
    // @unchecked: both fields are read and written only under `lock`.
    private let lock = NSLock()
    private var task: URLSessionDataTask?
    private var cancelled = false

    var isCancelled: Bool { lock.withLock { cancelled } }

    /// Resumes `task`, or cancels it at once when the request was cancelled first.
    func start(_ task: URLSessionDataTask) {
        let cancelledFirst = lock.withLock {
            self.task = task
            return cancelled
        }
        task.resume()
        if cancelledFirst { task.cancel() }
    }

    func cancel() {
        let task = lock.withLock {
            cancelled = true
            return self.task
        }
        task?.cancel()
    }
}
