import CPostgres
import Glibc

/// One libpq connection, used by one thread at a time and finished exactly once. Every statement goes through
/// `PQexecParams` with its parameters and results in binary: no SQL is ever built from strings.
final class PGConnection {
    private let handle: OpaquePointer
    /// Told `true` before each round trip to the database (a statement, or a pipeline of them) and `false` once it
    /// returned, on the connection's thread: how long the database leaves one unanswered can then be watched.
    var roundTrips: ((_ waiting: Bool) -> Void)?

    /// Connects (blocking, up to 5 s unless the URL says otherwise): call it on a storage thread, never on an
    /// event loop. `url` is anything libpq accepts: `postgresql://user@host:port/db?sslmode=...` or
    /// `host=... port=... dbname=...`. `role` names the connection's use in the database's `pg_stat_activity`
    /// (`application_name`: `changeserver` followed by it).
    init(_ url: String, role: String? = nil) throws(StorageError) {
        // Later keywords override earlier ones, so the URL's own settings win over these defaults: notices such as
        // "relation already exists, skipping" kept off stderr, and a database that vanished from the network (no
        // reset) noticed within about 10 s through keepalives and the TCP user timeout, instead of hanging writes.
        // The database ends a session left idle inside a transaction after `idleInTransactionTimeout`: a server
        // frozen or cut off between a commit's two round trips would otherwise hold its collections' rows, and so
        // every other server's writes to them, until the database's own keepalives notice (hours by default). An
        // `idle_session_timeout` of the database or role is turned off: the writer's connection sits idle between
        // writes, and each first write after a while would meet it ended.
        let defaults = [
            ("connect_timeout", "5"),
            (
                "options",
                "-c client_min_messages=warning -c idle_in_transaction_session_timeout=\(Self.idleInTransactionTimeout)"
                    + " -c idle_session_timeout=0"
            ),
            ("application_name", role.map { "changeserver " + $0 } ?? "changeserver"), ("keepalives_idle", "5"),
            ("keepalives_interval", "2"),
            ("keepalives_count", "3"), ("tcp_user_timeout", "10000"),
        ]
        let keywords = defaults.map(\.0) + ["dbname"]
        let values = defaults.map(\.1) + [url]
        let connection = withCStrings(keywords) { keywordPointers in
            withCStrings(values) { valuePointers in PQconnectdbParams(keywordPointers, valuePointers, 1) }
        }
        guard let connection else { throw .unavailable(reason: "libpq could not allocate a connection") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let reason = Self.message(PQerrorMessage(connection))
            PQfinish(connection)
            throw .unavailable(reason: reason)
        }
        // The server's notices (a FATAL before a shutdown cuts the connection) would go to stderr as they are; the
        // failures they announce are reported by the statements that meet them.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        handle = connection
    }

    deinit { PQfinish(handle) }

    /// How long the database lets a session of this server sit idle inside a transaction (see `init`): far above a
    /// commit's two round trips.
    static let idleInTransactionTimeout = "5s"

    var isBroken: Bool { PQstatus(handle) != CONNECTION_OK }

    /// Ends both directions of a connection's socket from another thread, without closing it: a round trip that
    /// waits on it returns with an error, and the connection is broken.
    static func endSocket(_ socket: Int32) {
        // Linux's SHUT_RDWR: Glibc's constant is not found here by the release build (the debug build finds it).
        let bothDirections: Int32 = 2
        shutdown(socket, bothDirections)
    }

    /// The socket, to wait on for notifications.
    var socket: Int32 { PQsocket(handle) }

    var errorMessage: String { Self.message(PQerrorMessage(handle)) }

    /// Runs one statement and returns its rows.
    /// - Throws: `StorageError.unavailable` with the server's message when it fails (the connection may be broken:
    ///   check `isBroken`).
    @discardableResult
    func execute(_ sql: String, _ parameters: [PGParameter] = []) throws(StorageError) -> PGResult {
        roundTrips?(true)
        defer { roundTrips?(false) }
        let result = withParameters(parameters) { count, types, values, lengths, formats in
            PQexecParams(handle, sql, count, types, values, lengths, formats, 1)
        }
        guard let result else { throw .unavailable(reason: errorMessage) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let reason = Self.message(PQresultErrorMessage(result))
            PQclear(result)
            throw .unavailable(reason: reason)
        }
        return PGResult(result)
    }

    /// Sends `statements` together and reads their results (libpq's pipeline mode): one round trip instead of one
    /// each. One outcome per statement, in order. After a statement fails, PostgreSQL skips the rest (their
    /// outcome is that failure too); a statement whose result never came (the connection broke) fails with the
    /// connection's message: check `isBroken`.
    func pipeline(_ statements: [(sql: String, parameters: [PGParameter])]) -> [Result<PGResult, StorageError>] {
        let broken = { [self] in
            [Result<PGResult, StorageError>](
                repeating: .failure(.unavailable(reason: errorMessage)), count: statements.count)
        }
        guard PQenterPipelineMode(handle) == 1 else { return broken() }
        roundTrips?(true)
        defer {
            PQexitPipelineMode(handle)
            roundTrips?(false)
        }
        for statement in statements {
            let sent = withParameters(statement.parameters) { count, types, values, lengths, formats in
                PQsendQueryParams(handle, statement.sql, count, types, values, lengths, formats, 1)
            }
            guard sent == 1 else { return broken() }
        }
        guard PQpipelineSync(handle) == 1 else { return broken() }
        var outcomes: [Result<PGResult, StorageError>] = []
        var firstFailure: StorageError?
        for _ in statements {
            guard let result = PQgetResult(handle) else { break }
            // Each statement's results end with a NULL.
            while let extra = PQgetResult(handle) { PQclear(extra) }
            let status = PQresultStatus(result)
            if status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK {
                outcomes.append(.success(PGResult(result)))
                continue
            }
            let failure =
                status == PGRES_PIPELINE_ABORTED
                ? firstFailure ?? .unavailable(reason: "skipped after an earlier statement failed")
                : StorageError.unavailable(reason: Self.message(PQresultErrorMessage(result)))
            PQclear(result)
            firstFailure = firstFailure ?? failure
            outcomes.append(.failure(failure))
        }
        if outcomes.count < statements.count {
            let failure = StorageError.unavailable(reason: errorMessage)
            outcomes += Array(repeating: .failure(failure), count: statements.count - outcomes.count)
            return outcomes
        }
        // The end of the pipeline (PGRES_PIPELINE_SYNC), after which the connection takes statements again.
        while let result = PQgetResult(handle) {
            let status = PQresultStatus(result)
            PQclear(result)
            if status == PGRES_PIPELINE_SYNC { break }
        }
        return outcomes
    }

    /// Reads what arrived on the socket and returns the notifications received: `(channel, payload)`.
    /// - Throws: when the connection is broken.
    func notifications() throws(StorageError) -> [(channel: String, payload: String)] {
        guard PQconsumeInput(handle) == 1 else { throw .unavailable(reason: errorMessage) }
        var received: [(String, String)] = []
        while let notify = PQnotifies(handle) {
            received.append((String(cString: notify.pointee.relname), String(cString: notify.pointee.extra)))
            PQfreemem(notify)
        }
        return received
    }

    /// Why libpq cannot read `url` as a connection string (a malformed URI, a keyword it does not know such as
    /// `?sslmod=require`), or nil: found before any attempt to connect, where a connection would fail the same way
    /// for the start's 30 s of patience. A string with neither a scheme nor `=` is a database name, always
    /// readable. Values (`sslmode=bogus`) are checked by libpq only as it connects.
    ///
    /// libpq's reason quotes what it could not read, a whole URI or a password's characters among them, and it goes
    /// to the log: for a string that holds a password, it is left out.
    static func unreadable(_ url: String) -> String? {
        let isURI = url.hasPrefix("postgresql://") || url.hasPrefix("postgres://")
        guard isURI || url.contains("=") else { return nil }
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(url, &error) else {
            defer { PQfreemem(error) }
            let authority = url.split(separator: "://", maxSplits: 1).last ?? ""
            let userInfo = isURI ? authority.split(separator: "@", maxSplits: 1).dropLast().first : nil
            // libpq decodes a URI's percent-encoding, keywords included (`?%70assword=`).
            let holdsPassword =
                userInfo?.contains(":") == true || percentDecoded(url).lowercased().contains("password")
            return holdsPassword
                ? "libpq cannot read it (its reason is not shown, since it may quote the password: give the password in "
                    + "PGPASSWORD instead, and libpq's reason is shown)" : message(error)
        }
        PQconninfoFree(options)
        return nil
    }

    /// Whether `error`, a failure to connect, is libpq refusing a value of the connection string (`invalid sslmode
    /// value: "bogus"`, `invalid integer value "x" for connection option "port"`) before any attempt to connect:
    /// trying again cannot mend it. Its messages in English only; a translated one is tried again as any failure.
    static func refusesItsOptions(_ error: StorageError) -> Bool {
        guard case .unavailable(let reason) = error else { return false }
        return reason.hasPrefix("invalid ")
    }

    /// `text` with each `%XX` replaced by its byte, and bytes that are not UTF-8 replaced.
    private static func percentDecoded(_ text: String) -> String {
        var bytes: [UInt8] = []
        var rest = text.utf8[...]
        while let byte = rest.popFirst() {
            if byte == UInt8(ascii: "%"), rest.count >= 2,
                let decoded = UInt8(String(decoding: rest.prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(decoded)
                rest = rest.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func message(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "unknown libpq error" }
        var message = String(cString: text)
        while message.last?.isNewline == true { message.removeLast() }
        return message
    }
}

/// One parameter of a statement, sent in PostgreSQL's binary format.
enum PGParameter {
    case text(String)
    case int64(Int64)
    case bytes([UInt8])
    /// A `bytea[]` of one dimension.
    case byteArrays([[UInt8]])
    /// A `bigint[]` of one dimension.
    case int64s([Int64])

    private static let byteaOID: UInt32 = 17

    var type: UInt32 {
        switch self {
        case .text: 25
        case .int64: 20
        case .bytes: Self.byteaOID
        case .byteArrays: 1001
        case .int64s: 1016
        }
    }

    /// The value's bytes; nil for NULL.
    var encoded: [UInt8]? {
        switch self {
        case .text(let text): return Array(text.utf8)
        case .int64(let value): return bigEndian(UInt64(bitPattern: value))
        case .bytes(let bytes): return bytes
        case .byteArrays(let elements):
            // ndim, has-nulls flag, element type, then per dimension its length and lower bound; then each
            // element as its length and bytes.
            var out = bigEndian32(1) + bigEndian32(0) + bigEndian32(Self.byteaOID)
            out += bigEndian32(UInt32(elements.count)) + bigEndian32(1)
            for element in elements { out += bigEndian32(UInt32(element.count)) + element }
            return out
        case .int64s(let elements):
            var out = bigEndian32(1) + bigEndian32(0) + bigEndian32(20)
            out += bigEndian32(UInt32(elements.count)) + bigEndian32(1)
            for element in elements { out += bigEndian32(8) + bigEndian(UInt64(bitPattern: element)) }
            return out
        }
    }
}

/// A result, cleared exactly once. Values come in binary (`resultFormat` 1).
final class PGResult {
    private let handle: OpaquePointer

    init(_ handle: OpaquePointer) { self.handle = handle }

    deinit { PQclear(handle) }

    var rows: Int { Int(PQntuples(handle)) }

    func isNull(_ row: Int, _ column: Int) -> Bool { PQgetisnull(handle, Int32(row), Int32(column)) == 1 }

    func bytes(_ row: Int, _ column: Int) -> [UInt8] {
        let length = Int(PQgetlength(handle, Int32(row), Int32(column)))
        guard length > 0, let value = PQgetvalue(handle, Int32(row), Int32(column)) else { return [] }
        return value.withMemoryRebound(to: UInt8.self, capacity: length) {
            Array(UnsafeBufferPointer(start: $0, count: length))
        }
    }

    func string(_ row: Int, _ column: Int) -> String { String(decoding: bytes(row, column), as: UTF8.self) }

    /// An `int8` column (0 when it is not 8 bytes long, which a well-formed result never is).
    func int64(_ row: Int, _ column: Int) -> Int64 {
        let value = bytes(row, column)
        guard value.count == 8 else { return 0 }
        return Int64(bitPattern: value.reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
    }
}

private func bigEndian(_ value: UInt64) -> [UInt8] {
    (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) }
}

private func bigEndian32(_ value: UInt32) -> [UInt8] {
    (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) }
}

/// Calls `body` with a NULL-terminated array of C strings that live for the call.
private func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { for copy in copies { free(copy) } }
    return body(copies.map { UnsafePointer($0) } + [nil])
}

/// Calls `body` with the parameters as libpq takes them (count, types, values, lengths, formats: all binary),
/// valid for the call.
private func withParameters<R>(
    _ parameters: [PGParameter],
    _ body: (Int32, [UInt32], [UnsafePointer<CChar>?], [Int32], [Int32]) -> R
) -> R {
    let encoded = parameters.map(\.encoded)
    let lengths = encoded.map { Int32($0?.count ?? 0) }
    let formats = [Int32](repeating: 1, count: parameters.count)
    return withBuffers(encoded) { values in
        body(Int32(parameters.count), parameters.map(\.type), values, lengths, formats)
    }
}

/// Calls `body` with pointers to each buffer's bytes (nil for NULL), valid for the call.
private func withBuffers<R>(_ buffers: [[UInt8]?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies: [UnsafeMutablePointer<CChar>?] = buffers.map { buffer in
        guard let buffer else { return nil }
        let copy = UnsafeMutablePointer<CChar>.allocate(capacity: max(buffer.count, 1))
        buffer.withUnsafeBytes { raw in
            if let base = raw.baseAddress { UnsafeMutableRawPointer(copy).copyMemory(from: base, byteCount: raw.count) }
        }
        return copy
    }
    defer { for copy in copies { copy?.deallocate() } }
    return body(copies.map { $0.map { UnsafePointer($0) } })
}
