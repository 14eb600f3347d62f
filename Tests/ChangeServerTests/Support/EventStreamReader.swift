import Foundation

/// A `text/event-stream` response read as it arrives: the chunked body decoded, then split into Server-Sent
/// Events (and comments, which the tests look for as heartbeats).
final class EventStreamReader {
    struct Event {
        var name: String?
        var id: String?
        var data: String
        /// A block that dispatches no event: comments (`: ...`), or fields without `data`.
        var isComment: Bool

        var object: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any] ?? [:]
        }
    }

    enum Failure: Error {
        /// The connection closed without the chunked body's last chunk.
        case cut
        case malformed(String)
    }

    let connection: HTTPConnection
    let status: Int
    let headers: [String: String]
    /// The last chunk came: the server ended the stream cleanly.
    private(set) var ended = false
    private var raw: [UInt8] = []
    private var body: [UInt8] = []
    /// How far `body` was searched for the end of an event already (large events arrive in many reads).
    private var searched = 0

    init(
        port: Int, path: String, headers: [String: String] = [:], receiveTimeout: Double = 15,
        receiveBuffer: Int32? = nil
    ) throws {
        connection = try HTTPConnection(port: port, receiveTimeout: receiveTimeout, receiveBuffer: receiveBuffer)
        connection.sendRequest("GET", path, headers: ["Accept": "text/event-stream"].merging(headers) { $1 })
        var headEnd: Int?
        while headEnd == nil {
            headEnd = Self.find([13, 10, 13, 10], in: raw)
            if headEnd == nil { guard try Self.fill(connection, &raw) else { throw Failure.cut } }
        }
        let end = headEnd ?? 0
        let lines = String(decoding: raw[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        raw.removeFirst(end + 4)
        status = Int(lines.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
        var parsed: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            parsed[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        self.headers = parsed
    }

    /// The next event or comment; nil once the stream ended cleanly. Throws `Failure.cut` when the connection
    /// closed without the last chunk, or a receive timeout.
    func next() throws -> Event? {
        while true {
            if let blank = Self.find([10, 10], in: body, from: searched) {
                let block = String(decoding: body[..<blank], as: UTF8.self)
                body.removeFirst(blank + 2)
                searched = 0
                return Self.parse(block)
            }
            searched = max(0, body.count - 1)
            if ended { return nil }
            try readChunk()
        }
    }

    /// The next event that is not a comment.
    func nextEvent() throws -> Event? {
        while let event = try next() {
            if !event.isComment { return event }
        }
        return nil
    }

    private static func parse(_ block: String) -> Event {
        var event = Event(name: nil, id: nil, data: "", isComment: true)
        var dataLines: [String] = []
        for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix(":") { continue }
            event.isComment = false
            let (field, value) =
                line.firstIndex(of: ":").map {
                    (String(line[..<$0]), String(line[line.index(after: $0)...]).drop { $0 == " " })
                } ?? (String(line), "")
            switch field {
            case "event": event.name = String(value)
            case "id": event.id = String(value)
            case "data": dataLines.append(String(value))
            default: break
            }
        }
        event.data = dataLines.joined(separator: "\n")
        // A block without data (a comment, a lone `retry:`) dispatches no event (the SSE processing model).
        if dataLines.isEmpty { event.isComment = true }
        return event
    }

    private func readChunk() throws {
        var lineEnd = Self.find([13, 10], in: raw)
        while lineEnd == nil {
            guard try Self.fill(connection, &raw) else { throw Failure.cut }
            lineEnd = Self.find([13, 10], in: raw)
        }
        let end = lineEnd ?? 0
        let sizeText = String(decoding: raw[..<end], as: UTF8.self).split(separator: ";").first ?? ""
        guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
            throw Failure.malformed("chunk size '\(sizeText)'")
        }
        while raw.count < end + 2 + size + 2 { guard try Self.fill(connection, &raw) else { throw Failure.cut } }
        body += raw[(end + 2)..<(end + 2 + size)]
        raw.removeFirst(end + 2 + size + 2)
        if size == 0 { ended = true }
    }

    private static func find(_ marker: [UInt8], in bytes: [UInt8], from: Int = 0) -> Int? {
        guard bytes.count >= marker.count, from <= bytes.count - marker.count else { return nil }
        return bytes.withUnsafeBufferPointer { buffer in
            for start in from...(buffer.count - marker.count) where buffer[start] == marker[0] {
                if (1..<marker.count).allSatisfy({ buffer[start + $0] == marker[$0] }) { return start }
            }
            return nil
        }
    }

    private static func fill(_ connection: HTTPConnection, _ raw: inout [UInt8]) throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = recv(connection.descriptor, &chunk, chunk.count, 0)
        if count < 0 { throw Failure.malformed("recv errno \(errno)") }
        if count == 0 { return false }
        raw += chunk[..<count]
        return true
    }
}
