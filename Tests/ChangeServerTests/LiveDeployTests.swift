import Foundation
import ProcessSupport
import Testing

/// `deploy/nginx.conf`, the front of `deploy/compose.yaml`, with real nginx in front of a real server and of an
/// upstream that takes each request and closes without an answer, as a server killed in the middle of one does, or
/// answers it `503 shutting_down`, as a stopping server does.
@Suite(.tags(.liveServer)) struct LiveDeployTests {
    /// A write sent to a server that then died may have been committed: passed on to another server, it was
    /// answered for what it found (`404` for a deletion, `200` with nothing changed for an item it created, `412`
    /// for a condition), a definite answer that contradicts what happened. nginx passes `PUT` and `DELETE` on
    /// (they are idempotent to it, unlike `POST`), so writes are now never passed on: such a client gets `502`,
    /// which says the outcome is unknown. Reads are still passed on.
    @Test func theComposeFrontNeverPassesAWriteOnOnceSent() throws {
        let server = try ServerProcess()
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        let dying = try ClosingListener()
        defer { dying.stop() }
        let nginx = try ComposeFront(upstreams: [dying.port, server.port, server.port])
        defer { nginx.stop() }
        let front = Client(port: nginx.port)
        // Round robin sends one of the first three requests to each upstream entry: one of these writes reaches the
        // dying one.
        var statuses: [Int] = []
        for index in 0..<3 {
            let response = try front.put("/v1/collections/c/items/w\(index)", ["data": index])
            statuses.append(response.status)
            if response.status == 502 {
                // The front's own error, in the API's form.
                #expect(response.errorCode == "bad_gateway", "\(response.text)")
                #expect(response.header("Content-Type") == "application/json")
                #expect(response.header("Retry-After") == nil, "a write is to be read before it is sent again")
                #expect(response.text.contains("A write's outcome is unknown"), "\(response.text)")
            }
            let kept = try server.client.get("/v1/collections/c/items/w\(index)").status
            #expect(kept == (response.status == 201 ? 200 : 404), "w\(index): \(response.status), then \(kept)")
        }
        #expect(
            Set(statuses).isSubset(of: [201, 502]) && statuses.contains(502), "\(statuses), \(dying.accepted) accepted")
        for _ in 0..<3 { #expect(try front.get("/v1/collections/c").status == 200) }
        #expect(dying.accepted >= 1)
    }

    /// A read a stopping server answers `503 shutting_down` (its held polls, as the contract says) is sent once more,
    /// to another server: through the front, a rolling restart showed a third of the clients a `503` at each step.
    /// A write such a server refuses is never sent again (it gets the `503` as it is).
    @Test func theComposeFrontSendsAReadAStoppingServerRefusesToAnother() throws {
        let server = try ServerProcess()
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        let body = #"{"error":{"code":"shutting_down","message":"The server is shutting down."}}"#
        let refusal =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            + "Connection: close\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        let stopping = try ClosingListener(answering: Array(refusal.utf8))
        defer { stopping.stop() }
        let nginx = try ComposeFront(upstreams: [stopping.port, server.port, server.port])
        defer { nginx.stop() }
        let front = Client(port: nginx.port)
        // Round robin sends one of every three requests to the stopping one first.
        for index in 0..<6 {
            let read = try front.get("/v1/collections/c")
            #expect(read.status == 200, "read \(index): \(read.status) \(read.text)")
        }
        #expect(stopping.accepted >= 1, "no read met the stopping server: nothing was tested")
        var statuses: [Int] = []
        for index in 0..<3 { statuses.append(try front.put("/v1/collections/c/items/w\(index)", ["data": 1]).status) }
        #expect(Set(statuses).isSubset(of: [201, 503]) && statuses.contains(503), "\(statuses)")
    }
}

/// `deploy/nginx.conf` with its three upstreams on these loopback ports, run by a real nginx on a free port of its
/// own, started once it takes connections.
struct ComposeFront {
    let port: Int
    private let nginx: Process
    private let directory: String

    init(upstreams: [Int]) throws {
        let directory = try ServerProcess.temporaryDirectory()
        let port = try ClosingListener.freePort()
        let shipped = try String(
            contentsOf: Repository.root.appendingPathComponent("deploy/nginx.conf"), encoding: .utf8)
        let config =
            shipped
            .replacingOccurrences(of: "server-1:8080", with: "127.0.0.1:\(upstreams[0])")
            .replacingOccurrences(of: "server-2:8080", with: "127.0.0.1:\(upstreams[1])")
            .replacingOccurrences(of: "server-3:8080", with: "127.0.0.1:\(upstreams[2])")
            .replacingOccurrences(of: "listen 8080;", with: "listen 127.0.0.1:\(port);")
            .replacingOccurrences(
                of: "worker_processes auto;",
                with: "worker_processes 1;\npid \(directory)/nginx.pid;\nerror_log \(directory)/error.log;"
            )
            .replacingOccurrences(
                of: "http {",
                with: "http {\n    access_log off;\n"
                    + ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map {
                        "    \($0)_temp_path \(directory)/\($0);\n"
                    }.joined())
        #expect(config.contains("127.0.0.1:\(upstreams[0])") && config.contains("listen 127.0.0.1:\(port);"))
        try config.write(toFile: directory + "/nginx.conf", atomically: true, encoding: .utf8)
        let nginx = Process()
        nginx.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
        nginx.arguments = ["-p", directory, "-c", directory + "/nginx.conf", "-g", "daemon off;"]
        try Spawning.run(nginx)
        (self.port, self.nginx, self.directory) = (port, nginx, directory)
        // Ready once it accepts connections: a request to learn it would already meet the first upstream, and nginx
        // would send that one fewer requests after a failure.
        guard waitUntil(timeout: 10, { (try? HTTPConnection(port: port)) != nil }) else {
            stop()
            throw TestFailure("nginx took no connection on port \(port) within 10 s")
        }
    }

    func stop() {
        nginx.terminate()
        nginx.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
