import Testing

@testable import ChangeServer

/// The router on raw paths: segments, percent escapes, trailing slashes, names, and the web client's files.
@Suite struct InProcessRouteMatchTests {
    @Test func pathsNameTheirResources() throws {
        #expect(try Route.match("/healthz") == .health)
        #expect(try Route.match("/metrics") == .metrics)
        #expect(try Route.match("/v1/collections") == .collections)
        #expect(try Route.match("/v1/collections/") == .collections)
        #expect(try Route.match("/v1/collections/c") == .collection("c"))
        #expect(try Route.match("/v1/collections/c/") == .collection("c"))
        #expect(try Route.match("/v1/collections/c/mutations") == .mutations("c"))
        #expect(try Route.match("/v1/collections/c/changes") == .changes("c"))
        #expect(try Route.match("/v1/collections/c/items/a%2Fb") == .item(collection: "c", id: "a/b"))
        #expect(try Route.match("/v1/collections/%41b.c") == .collection("Ab.c"))
        #expect(try Route.match("/v1/views") == .views)
        #expect(try Route.match("/v1/views/v/changes") == .viewChanges("v"))
        #expect(try Route.match("/v1/client/changefeed.js") == .asset("/v1/client/changefeed.js"))
        #expect(try Route.match("/") == .asset("/"))
        #expect(try Route.match("/v1/%63ollections/c/%69tems/x") == .item(collection: "c", id: "x"))
        #expect(try Route.match("/v1/views/v/items/x") == .viewItem(view: "v", id: "x"))
        #expect(try Route.match("/v1/views/v/mutations/") == .viewWrite("v", template: "/v1/views/{name}/mutations"))
        #expect(try Route.match("/healthz/") == .health)
    }

    @Test func longPathsNameNothingButTheirEscapesAreStillChecked() throws {
        #expect(try Route.match("/v1/collections/c/items/a/b/c/d/e") == nil)
        #expect(throws: HTTPError.self) { try Route.match("/v1/collections/c/items/a/b/c/d/%zz") }
        #expect(throws: HTTPError.self) { try Route.match("/v1/collections/c%2Fd") }
    }

    /// An HTTP/1.1 server must accept a request target in absolute form (what a client talking to a proxy
    /// sends); its path is what follows the authority.
    @Test(arguments: [
        ("http://127.0.0.1:8080/v1/collections/inbox", "/v1/collections/inbox"),
        ("HTTPS://example.com/v1/views/v", "/v1/views/v"), ("http://example.com", "/"),
        ("/v1/collections", "/v1/collections"), ("*", "*"), ("httpx://a/b", "httpx://a/b"),
    ])
    func absoluteFormTargetsAreReadAsTheirPath(target: String, path: String) {
        #expect(Request.originPath(target) == path)
    }

    @Test func otherPathsNameNothing() throws {
        for path in [
            "", "/nowhere", "/v1", "/v1/collections/c/other", "/v1/collections/c/items", "//v1/collections",
            "/v1/collections/c//", "/v1/collections/c/items/a/b",
        ] {
            #expect(try Route.match(path) == nil, "\(path)")
        }
    }

    @Test func malformedSegmentsAndNamesAreRefused() {
        #expect(throws: HTTPError.self) { try Route.match("/v1/collections/c/items/%zz") }
        #expect(throws: HTTPError.self) { try Route.match("/v1/collections/c/items/%c3") }
        #expect(throws: HTTPError.self) { try Route.match("/v1/collections/-c") }
        #expect(throws: HTTPError.self) { try Route.match("/v1/views/a%20b") }
    }
}
