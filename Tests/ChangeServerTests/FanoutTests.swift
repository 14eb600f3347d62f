import Foundation
import Testing

/// Limits that protect the server when many clients hold polls.
@Suite(.tags(.liveServer)) struct LiveFanoutTests {
    static func openDescriptors(_ pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    @Test func vanishedAndTimedOutPollsLeakNothing() throws {
        let server = try ServerProcess()
        let version = try #require(
            try server.client.put("/v1/collections/c", ["sections": []]).object["version"] as? String)
        let baseline = Self.openDescriptors(server.process.processIdentifier)
        for _ in 0..<3 {
            var kept: [HTTPConnection] = []
            for index in 0..<100 {
                let poll = try HTTPConnection(port: server.port)
                poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=1")
                if index % 2 == 0 { kept.append(poll) }
            }
            try waitForHeldPolls(server, 100)
            for poll in kept { #expect(try poll.readResponse().status == 200) }
            kept.removeAll()
            try waitForHeldPolls(server, 0)
        }
        let deadline = Date().addingTimeInterval(5)
        while Self.openDescriptors(server.process.processIdentifier) > baseline && Date() < deadline { usleep(50_000) }
        #expect(Self.openDescriptors(server.process.processIdentifier) <= baseline)
        #expect(try server.client.get("/metrics").text.contains("changeserver_poll_timeouts_total 300"))
    }

    /// Beyond `--max-connections` the server accepts nothing more (new connections wait in the backlog) until
    /// some close.
    @Test func connectionLimitHoldsBackTheExtraOnes() throws {
        let server = try ServerProcess(["--max-connections", "8", "--threads", "1"])
        let version = try #require(
            try server.client.put("/v1/collections/c", ["sections": []]).object["version"] as? String)
        let held = try (0..<8).map { _ in try HTTPConnection(port: server.port) }
        for poll in held { poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=2") }
        usleep(300_000)
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
