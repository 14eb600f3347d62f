import Foundation
import ProcessSupport
import Testing

@Suite(.tags(.liveServer)) struct LiveServiceTests {
    @Test func healthAnswersOK() throws {
        let server = try ServerProcess()
        let response = try server.client.get("/healthz")
        #expect(response.status == 200)
        #expect(response.object["status"] as? String == "ok")
        #expect(response.header("Content-Type") == "application/json; charset=utf-8")
    }

    @Test func unknownRouteIs404WithJSONError() throws {
        let server = try ServerProcess()
        for path in ["/v2/collections", "/v1/collections/a/b/c/d/e", "/v1/collections/inbox/nothing"] {
            let response = try server.client.get(path)
            #expect(response.status == 404, "\(path)")
            #expect(response.errorCode == "route_not_found", "\(path)")
        }
    }

    @Test func wrongMethodIs405WithAllow() throws {
        let server = try ServerProcess()
        let response = try server.client.request("POST", "/v1/collections/inbox")
        #expect(response.status == 405)
        #expect(response.errorCode == "method_not_allowed")
        #expect(response.header("Allow") == "GET, HEAD, PUT, DELETE, OPTIONS")
        // The message names what `Allow` does.
        #expect(response.text.contains("allowed: GET, HEAD, PUT, DELETE, OPTIONS."), "\(response.text)")
        let feed = try server.client.request("DELETE", "/v1/collections/inbox/changes")
        #expect(feed.status == 405)
        #expect(feed.header("Allow") == "GET, HEAD, OPTIONS")
    }

    @Test func invalidCollectionNameIs400() throws {
        let server = try ServerProcess()
        for name in ["-leading", ".x", String(repeating: "a", count: 129), "sp%20ace", "%C3%A9"] {
            let response = try server.client.get("/v1/collections/\(name)")
            #expect(response.status == 400, "\(name)")
            #expect(response.errorCode == "invalid_name", "\(name)")
        }
        let malformed = try server.client.get("/v1/collections/a%zz")
        #expect(malformed.status == 400)
    }

    @Test func metricsUsePrometheusTextFormat() throws {
        let server = try ServerProcess()
        _ = try server.client.get("/healthz")
        // Each event loop adds its request counts at the end of its turn: another loop may answer first.
        let healthzCounted = #"changeserver_requests_total{method="GET",route="/healthz",status="200"} 1"#
        #expect(try waitUntil(timeout: 5) { try server.client.get("/metrics").text.contains(healthzCounted) })
        let response = try server.client.get("/metrics")
        #expect(response.status == 200)
        #expect(response.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        let text = response.text
        for name in [
            "changeserver_requests_total", "changeserver_mutations_total", "changeserver_held_polls",
            "changeserver_changesets_delivered_total", "changeserver_journal_bytes", "changeserver_fsync_seconds",
        ] {
            #expect(text.contains("# TYPE \(name) "), "\(name)")
        }
        _ = try server.client.request("BREW\"X", "/healthz")
        #expect(try waitUntil(timeout: 5) { try server.client.get("/metrics").text.contains(#"method="other""#) })
        #expect(text.contains("changeserver_held_polls 0"))
    }

    @Test func oversizeBodyIs413BeforeReadingIt() throws {
        let server = try ServerProcess(["--max-body-bytes", "1000"])
        let connection = try HTTPConnection(port: server.port)
        connection.send(
            Array(
                "PUT /v1/collections/big HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\n\r\n"
                    .utf8))
        let response = try connection.readResponse()
        #expect(response.status == 413)
        #expect(response.errorCode == "payload_too_large")
        let chunked = try HTTPConnection(port: server.port)
        let chunk = "{\"sections\": [" + String(repeating: " ", count: 1500) + "]}"
        chunked.send(
            Array(
                "PUT /v1/collections/big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\(String(chunk.utf8.count, radix: 16))\r\n\(chunk)\r\n0\r\n\r\n"
                    .utf8))
        #expect(try chunked.readResponse().status == 413)
        #expect(try server.client.get("/v1/collections/big").status == 404)
    }

    @Test func wrongContentTypeIs415() throws {
        let server = try ServerProcess()
        let response = try server.client.request(
            "PUT", "/v1/collections/inbox", headers: ["Content-Type": "text/plain"],
            body: Array(#"{"sections":[]}"#.utf8))
        #expect(response.status == 415)
        #expect(response.errorCode == "unsupported_media_type")
        #expect(try server.client.get("/v1/collections/inbox").status == 404)
    }
}
