import Foundation
import Model

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Writes to a ChangeServer, and reads what a feed does not hand over: a collection's or view's snapshot, one
/// item. Each method is one request of the contract (API.md), answered or refused with one typed error,
/// `WriteError`; nothing is retried, since a write whose answer was lost may have been committed
/// (`WriteError.outcomeUnknown`). Follow what changes with `FeedClient`: its feed brings every committed write,
/// this client's included.
public struct ChangeServerClient: Sendable {
    /// The server, for example `http://127.0.0.1:8080`.
    public let baseURL: URL
    let token: String?
    /// How long a request may go unanswered (between two bytes of its answer) before it is `WriteError.noAnswer`.
    public var timeout: Duration
    let transport: Transport

    /// A client of the server at `baseURL`.
    /// - Parameters:
    ///   - token: sent as `Authorization: Bearer <token>` when the server has a write (or read) token.
    ///   - session: as `FeedClient`'s: nil, `FeedClient.defaultSession`, but on Linux a connection of the client's
    ///     own for each request to an `http://` URL (`SocketHTTP`): a write is then sent once, never again by the
    ///     transport.
    public init(
        baseURL: URL, token: String? = nil, timeout: Duration = .seconds(30), session: URLSession? = nil
    ) {
        self.baseURL = baseURL
        self.token = token
        self.timeout = timeout
        self.transport = Transport(
            session: session ?? FeedClient.defaultSession, usesSockets: session == nil && FeedClient.sessionOfItsOwn)
    }

    /// Creates the collection with `sections` (`created`), or replaces its whole content, which the server diffs
    /// against the old (`PUT /v1/collections/{name}`). `.absent` creates only.
    public func put(_ collection: String, sections: [Section], if condition: WriteCondition = .always)
        async throws(WriteError) -> WriteResult
    {
        try await write("PUT", ["collections", collection], body: try WireEncoding.content(sections), condition)
    }

    /// Applies `ops` in order, all or none (`POST /v1/collections/{name}/mutations`). A rejected op is
    /// `.refused` with its index in `ServerError.op`.
    public func apply(_ ops: [Op], to collection: String, if condition: WriteCondition = .always)
        async throws(WriteError) -> WriteResult
    {
        try await write(
            "POST", ["collections", collection, "mutations"], body: try WireEncoding.mutation(ops), condition)
    }

    /// Creates the item (`created`) or replaces its data (`PUT /v1/collections/{name}/items/{id}`). A new item
    /// goes to `section` (by default the last; a collection with no section gets one with id `"default"`) at
    /// `index` (by default the end); an item that exists moves there when either is given.
    public func upsert(
        _ id: String, in collection: String, data: JSONData = .null, section: SectionRef? = nil, index: Int? = nil,
        if condition: WriteCondition = .always
    ) async throws(WriteError) -> WriteResult {
        let body = try WireEncoding.upsert(data: data, section: section, index: index)
        return try await write("PUT", ["collections", collection, "items", id], body: body, condition)
    }

    /// Deletes one item (`DELETE /v1/collections/{name}/items/{id}`): `.refused` with `.itemNotFound` when absent.
    public func deleteItem(_ id: String, from collection: String, if condition: WriteCondition = .always)
        async throws(WriteError) -> WriteResult
    {
        try await write("DELETE", ["collections", collection, "items", id], body: nil, condition)
    }

    /// Deletes the collection (`DELETE /v1/collections/{name}`); its followers are told `.missing`.
    public func deleteCollection(_ collection: String, if condition: WriteCondition = .always)
        async throws(WriteError)
    {
        _ = try await send("DELETE", ["collections", collection], body: nil, condition, expecting: [204])
    }

    /// Defines the view, or replaces its definition (`PUT /v1/views/{name}`): `definition` is the JSON object of
    /// the README's "Views" (`source`, `filter`, `sectionBy`, `sortBy`, `limit`). The result is the view's.
    public func defineView(_ view: String, definition: JSONData, if condition: WriteCondition = .always)
        async throws(WriteError) -> WriteResult
    {
        do throws(JSON.ParseError) {
            _ = try JSON(parsing: definition)
        } catch {
            throw .invalidRequest(
                "the definition is not one JSON value (\(error.reason) at byte \(error.offset))")
        }
        return try await write("PUT", ["views", view], body: definition.bytes, condition)
    }

    /// Deletes the view (`DELETE /v1/views/{name}`); its source stays.
    public func deleteView(_ view: String, if condition: WriteCondition = .always) async throws(WriteError) {
        _ = try await send("DELETE", ["views", view], body: nil, condition, expecting: [204])
    }

    /// The whole content of a collection or view now (`GET /v1/collections/{name}` or `/v1/views/{name}`).
    public func snapshot(of name: String, kind: FeedClient.Kind = .collection) async throws(WriteError) -> Snapshot {
        let answer = try await send("GET", [kind == .collection ? "collections" : "views", name], body: nil, .always)
        return try Self.decoded { () throws(FeedError) in try WireDecoding.snapshot(Array(answer.body), kind: kind) }
    }

    /// One item and where it stands (`GET /v1/collections/{name}/items/{id}`), or where a view shows it
    /// (`GET /v1/views/{name}/items/{id}`, `kind: .view`: in a leaderboard, a player's rank); `404
    /// item_not_found` for one the view leaves out.
    public func item(_ id: String, in name: String, kind: FeedClient.Kind = .collection) async throws(WriteError) -> (
        item: Item, at: ItemPath
    ) {
        let answer = try await send("GET", [kind.pathSegment, name, "items", id], body: nil, .always)
        return try Self.decoded { () throws(FeedError) in try WireDecoding.placedItem(Array(answer.body)) }
    }

    private func write(_ method: String, _ path: [String], body: [UInt8]?, _ condition: WriteCondition)
        async throws(WriteError) -> WriteResult
    {
        let answer = try await send(method, path, body: body, condition)
        return try Self.decoded { () throws(FeedError) in
            try WireDecoding.writeResult(Array(answer.body), created: answer.status == 201)
        }
    }

    private func send(
        _ method: String, _ path: [String], body: [UInt8]?, _ condition: WriteCondition,
        expecting statuses: Set<Int> = [200, 201]
    ) async throws(WriteError) -> HTTPAnswer {
        let url = try url(path)
        if let token, let problem = Transport.problem(withToken: token) { throw .invalidRequest(problem) }
        // A task cancelled before the request goes sends nothing: cancelling one under way is a race with its answer.
        guard !Task.isCancelled else { throw .cancelled(sent: false) }
        let answer: HTTPAnswer
        do {
            answer = try await transport.send(
                method, url, token: token, body: body, headers: condition.header.map { [($0.name, $0.value)] } ?? [],
                timeout: timeout)
        } catch let error as NotSent {
            throw error.cancelled ? .cancelled(sent: false) : .unreachable(error.description)
        } catch is CancellationError {
            throw .cancelled(sent: true)
        } catch {
            throw .noAnswer(String(describing: error))
        }
        guard statuses.contains(answer.status) else {
            // A success the method does not answer with (a front's own, say) says nothing of what was done.
            if (200..<300).contains(answer.status) {
                throw .invalidAnswer("status \(answer.status), where \(statuses.sorted()) was expected")
            }
            throw .refused(WireDecoding.serverError(answer))
        }
        return answer
    }

    private func url(_ path: [String]) throws(WriteError) -> URL {
        if let problem = FeedClient.problem(withBaseURL: baseURL) { throw .invalidURL(problem) }
        var text = baseURL.absoluteString
        if text.hasSuffix("/") { text.removeLast() }
        text += "/v1"
        // Each part one segment: a `/` in a name or id is escaped, and the server refuses such a name.
        for segment in path {
            guard let escaped = FeedClient.pathSegment(segment) else {
                throw .invalidURL("\(baseURL): a name or id is empty")
            }
            text += "/" + escaped
        }
        guard let url = URL(string: text) else { throw .invalidURL(text) }
        return url
    }

    private static func decoded<T>(_ decode: () throws(FeedError) -> T) throws(WriteError) -> T {
        do throws(FeedError) {
            return try decode()
        } catch {
            throw .invalidAnswer(error.description)
        }
    }
}
