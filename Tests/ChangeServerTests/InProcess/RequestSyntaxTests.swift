import Testing

@testable import ChangeServer

/// What a request target and a `Host` value may hold (RFC 9112 §3.2), which libmicrohttpd does not check.
@Suite struct InProcessRequestSyntaxTests {
    @Test(arguments: [
        "", "127.0.0.1", "127.0.0.1:8080", "localhost:", "[::1]", "[::1]:443", "[v7.fe80::a+en1]", "db.internal",
        "x,y", "a%20b", "xn--bcher-kva.example:99999", "under_score~tilde", "sub!$&'()*+;=delims", "[fe80::1%25en0]:80",
    ])
    func hostsAServerTakes(host: String) {
        #expect(Request.isValidHost(host))
    }

    @Test(arguments: [
        "a b", "a\u{1}b", "[::1", "::1", "[]", "[::1]x", "[::1]:8o", "x:80:81", "a%2", "a%zz", "é.example", "a/b",
        "a@b", "a\"b", "x:-1", "a b:80",
    ])
    func hostsARequestIsRefusedFor(host: String) {
        #expect(!Request.isValidHost(host))
    }

    @Test func aTargetHoldsNoSpaceControlCharacterOrDEL() {
        func request(_ path: String, _ query: [(name: String, value: String)] = []) -> Request {
            Request(method: "GET", path: path, query: query, headers: [])
        }
        #expect(!request("/v1/collections/a%20b/items/%00", [("since", "E.1"), ("x", "%7F")]).hasMalformedTarget)
        for path in ["/a b", "/a\tb", "/a\u{1}b", "/a\u{7F}b", "/a\rb", "/a\nb", "/a#b"] {
            #expect(request(path).hasMalformedTarget, "\(path.debugDescription)")
        }
        // libmicrohttpd reads a `+` of the query as a space before anything sees it: a space there is taken.
        #expect(!request("/v1/collections", [("limit", "1 0")]).hasMalformedTarget)
        #expect(request("/v1/collections", [("limit", "1\r0")]).hasMalformedTarget)
        #expect(request("/v1/collections", [("li\u{1}mit", "1")]).hasMalformedTarget)
        #expect(request("/v1/collections", [("x", "\u{7F}")]).hasMalformedTarget)
        #expect(request("/v1/collections", [("x", "a#b")]).hasMalformedTarget)
    }
}
