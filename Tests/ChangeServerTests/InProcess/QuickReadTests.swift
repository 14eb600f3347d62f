import Foundation
import Testing

@testable import ChangeServer

/// The quick answer to a snapshot read (`App.quickRead`): the same answer the usual way gives, byte for byte and
/// the very same shared response, and none at all wherever something could make the usual answer differ.
@Suite struct InProcessQuickReadTests {
    private static let inbox = #"{"sections": [{"id": "s", "items": [{"id": "a", "data": 1}, {"id": "b"}]}]}"#

    /// The server with `inbox`, and the version it was created at.
    private func serverWithInbox(_ arguments: [String] = [], headers: [(String, String)] = []) throws -> (
        InProcessServer, String
    ) {
        let server = try InProcessServer(arguments)
        let created = server.send("PUT", "/v1/collections/inbox", body: Self.inbox, headers: headers)
        #expect(created.status == 201)
        return (server, try #require(created.json["version"] as? String))
    }

    /// The quick answer to a read of `path` with these headers (names in any case), if there is one.
    private func quick(_ server: InProcessServer, _ path: String, headers: [(String, String)] = []) -> (
        route: String, answer: Answer
    )? {
        var path = path
        return path.withUTF8 { bytes in
            server.app.quickRead(path: bytes) { name in
                headers.first { $0.0.lowercased() == name.lowercased() }?.1
            }
        }.map { ($0.route, Answer($0.1)) }
    }

    private func expectSame(_ quick: Answer?, _ usual: Answer) {
        #expect(quick?.status == usual.status)
        #expect(quick?.headers.map { "\($0.name): \($0.value)" } == usual.headers.map { "\($0.name): \($0.value)" })
        #expect(quick?.body == usual.body)
        #expect(quick?.share != nil && quick?.share == usual.share)
    }

    @Test func aSnapshotReadIsAnsweredAsTheUsualWayAnswersIt() throws {
        let (server, version) = try serverWithInbox()
        // Not encoded yet at this version: the usual way encodes it.
        #expect(quick(server, "/v1/collections/inbox") == nil)
        let usual = server.send("GET", "/v1/collections/inbox")
        #expect(usual.status == 200)
        let answer = try #require(quick(server, "/v1/collections/inbox"))
        #expect(answer.route == "/v1/collections/{name}")
        expectSame(answer.answer, usual)

        for tag in ["\"\(version)\"", "W/\"\(version)\"", "\"other\", \"\(version)\"", "*"] {
            let headers = [("If-None-Match", tag)]
            let notModified = server.send("GET", "/v1/collections/inbox", headers: headers)
            #expect(notModified.status == 304)
            expectSame(quick(server, "/v1/collections/inbox", headers: headers)?.answer, notModified)
        }
        let other = [("if-none-match", "\"other\"")]
        expectSame(quick(server, "/v1/collections/inbox", headers: other)?.answer, usual)
    }

    @Test func aViewSnapshotReadIsAnsweredAsTheUsualWayAnswersIt() throws {
        let (server, _) = try serverWithInbox()
        #expect(server.send("PUT", "/v1/views/all", body: #"{"source": "inbox"}"#).status == 201)
        #expect(quick(server, "/v1/views/all") == nil)
        let usual = server.send("GET", "/v1/views/all")
        #expect(usual.status == 200)
        let answer = try #require(quick(server, "/v1/views/all"))
        #expect(answer.route == "/v1/views/{name}")
        expectSame(answer.answer, usual)
    }

    /// A write makes the encoded snapshot old: no quick answer until the usual way has encoded the new one.
    @Test func anOldSnapshotIsNeverAnsweredQuickly() throws {
        let (server, _) = try serverWithInbox()
        _ = server.send("GET", "/v1/collections/inbox")
        #expect(quick(server, "/v1/collections/inbox") != nil)
        #expect(server.send("PUT", "/v1/collections/inbox/items/b", body: #"{"data": 2}"#).status == 200)
        #expect(quick(server, "/v1/collections/inbox") == nil)
        let usual = server.send("GET", "/v1/collections/inbox")
        expectSame(quick(server, "/v1/collections/inbox")?.answer, usual)
        #expect(server.send("DELETE", "/v1/collections/inbox").status == 204)
        #expect(quick(server, "/v1/collections/inbox") == nil)
    }

    /// Paths the router decides (another route, an escape, a trailing slash, an invalid name, nothing there).
    @Test(arguments: [
        "/v1/collections/inbox/", "/v1/collections/in%62ox", "/v1/collections/inbox/changes", "/v1/collections/",
        "/v1/collections", "/v1/collectionsinbox", "/v1/collections/-inbox", "/v1/collections/nothing",
        "/v1/views/inbox", "/V1/collections/inbox", "//v1/collections/inbox",
    ])
    func otherPathsTakeTheUsualWay(path: String) throws {
        let (server, _) = try serverWithInbox()
        _ = server.send("GET", "/v1/collections/inbox")
        #expect(quick(server, "/v1/collections/inbox") != nil)
        #expect(quick(server, path) == nil)
    }

    /// Tokens make every read check its `Authorization`; CORS origins add `Vary: Origin` to every answer (and an
    /// allowed `Origin` the CORS headers).
    @Test func readsThatNeedMoreTakeTheUsualWay() throws {
        let (tokens, _) = try serverWithInbox(["--read-token", "r"], headers: [("Authorization", "Bearer r")])
        #expect(tokens.send("GET", "/v1/collections/inbox", headers: [("Authorization", "Bearer r")]).status == 200)
        #expect(quick(tokens, "/v1/collections/inbox", headers: [("Authorization", "Bearer r")]) == nil)
        let (writeToken, _) = try serverWithInbox(["--write-token", "w"], headers: [("Authorization", "Bearer w")])
        _ = writeToken.send("GET", "/v1/collections/inbox")
        #expect(quick(writeToken, "/v1/collections/inbox") == nil)

        let (cors, _) = try serverWithInbox(["--cors-origin", "https://app.example"])
        _ = cors.send("GET", "/v1/collections/inbox")
        #expect(quick(cors, "/v1/collections/inbox", headers: [("Origin", "https://app.example")]) == nil)
        #expect(quick(cors, "/v1/collections/inbox") == nil)
        // `*` gives every request the same CORS headers: reads are answered quickly, with them added once.
        let (anyOrigin, _) = try serverWithInbox(["--cors-origin", "*"])
        _ = anyOrigin.send("GET", "/v1/collections/inbox")
        #expect(quick(anyOrigin, "/v1/collections/inbox", headers: [("Origin", "https://app.example")]) != nil)
        #expect(anyOrigin.app.sameCORSHeadersForAll?.contains { $0 == ("Access-Control-Allow-Origin", "*") } == true)
    }

    /// What a quick read adds to the shared answer is what the usual way adds for every request: nothing, or
    /// `*`'s CORS headers; with origins named one by one (and no `*`) there is no such set, and no quick read.
    @Test(arguments: [[], ["*"], ["*", "https://app.example"], ["https://app.example"]])
    func theQuickWayAddsWhatTheUsualWayAdds(origins: [String]) throws {
        let server = try InProcessServer(origins.flatMap { ["--cors-origin", $0] })
        let same = server.app.sameCORSHeadersForAll
        #expect((same == nil) == (origins == ["https://app.example"]))
        for headers in [[], [("Origin", "https://app.example")], [("Origin", "https://other.example")]] {
            let request = Request(method: "GET", path: "/v1/collections/inbox", headers: headers)
            let usual = server.app.corsHeaders(for: request)
            if let same { #expect(usual.elementsEqual(same, by: { $0 == $1 }), "\(origins) \(headers)") }
        }
    }

    @Test func aServerThatStoppedServingAnswersNothingQuickly() throws {
        let (server, _) = try serverWithInbox()
        _ = server.send("GET", "/v1/collections/inbox")
        #expect(quick(server, "/v1/collections/inbox") != nil)
        server.app.shutDown()
        #expect(quick(server, "/v1/collections/inbox") == nil)
    }
}
