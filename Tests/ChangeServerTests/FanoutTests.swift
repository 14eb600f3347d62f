import Foundation
import ProcessSupport
import Testing

/// Limits that protect the server when many clients hold polls.
@Suite(.tags(.liveServer)) struct LiveFanoutTests {
    /// How many of `connections` the server listening on `port` has accepted: in `/proc/net/tcp` a connection
    /// still in the listen backlog has no socket inode yet, an accepted one has.
    static func acceptedCount(of connections: [HTTPConnection], by port: Int) -> Int {
        let clientPorts = Set(connections.map(\.localPort))
        return LoopbackTCP.sockets().count { socket in
            socket.localPort == port && clientPorts.contains(socket.remotePort) && socket.inode != "0"
        }
    }

    /// Half the polls of each round vanish (their clients close) and are let go at once, the server watching their
    /// sockets for the hang-up; the other half time out. Nothing is left behind. (The vanishing half would time out
    /// only after a minute, so that a loaded machine's delays cannot make one count as timed out.)
    @Test func vanishedAndTimedOutPollsLeakNothing() throws {
        let server = try ServerProcess()
        let version = try #require(
            try server.client.put("/v1/collections/c", ["sections": []]).object["version"] as? String)
        let pid = server.process.processIdentifier
        let baseline = OpenDescriptors(of: pid)
        var ownPorts: Set<Int> = []
        let letGo = { server.logCount(of: "GET /v1/collections/c/changes 499 ") }
        for round in 0..<3 {
            var kept: [HTTPConnection] = []
            var vanishing: [HTTPConnection] = []
            for index in 0..<100 {
                let poll = try HTTPConnection(port: server.port)
                let timeout = index % 2 == 0 ? 5 : 60
                poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=\(timeout)")
                ownPorts.insert(poll.localPort)
                if index % 2 == 0 { kept.append(poll) } else { vanishing.append(poll) }
            }
            try waitForHeldPolls(server, 100)
            for poll in vanishing { poll.close() }
            #expect(waitUntil(timeout: 10) { letGo() == 50 * (round + 1) }, "\(letGo()) polls let go")
            for poll in kept { #expect(try poll.readResponse().status == 200) }
            kept.removeAll()
            try waitForHeldPolls(server, 0)
        }
        let released = waitUntil(timeout: 5) {
            let now = OpenDescriptors(of: pid)
            return now.count - now.foreignConnections(on: server.port, ownPorts: ownPorts) <= baseline.count
        }
        #expect(released, "open since the start: \(OpenDescriptors(of: pid).added(since: baseline))")
        #expect(try server.client.get("/metrics").text.contains("changeserver_poll_timeouts_total 150"))
    }

    /// Beyond `--max-connections` the server accepts nothing more (new connections wait in the backlog) until
    /// some close.
    @Test func connectionLimitHoldsBackTheExtraOnes() throws {
        let server = try ServerProcess(["--max-connections", "8", "--max-held-polls", "8", "--threads", "1"])
        let version = try #require(
            try server.client.put("/v1/collections/c", ["sections": []]).object["version"] as? String)
        let held = try (0..<8).map { _ in try HTTPConnection(port: server.port) }
        for poll in held { poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=2") }
        // `/metrics` cannot tell (its request would be the ninth connection): the kernel's socket table can.
        let accepted = waitUntil(timeout: 10) { Self.acceptedCount(of: held, by: server.port) == held.count }
        #expect(accepted, "the server accepted \(Self.acceptedCount(of: held, by: server.port)) of the 8 polls")
        let extra = try HTTPConnection(port: server.port, receiveTimeout: 10)
        extra.sendRequest("GET", "/healthz")
        var waiting = pollfd(fd: extra.descriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&waiting, 1, 1000) == 0, "answered beyond the connection limit")
        for connection in held {
            #expect(try connection.readResponse().status == 200)
            connection.close()
        }
        #expect(try extra.readResponse().status == 200)
    }
}
