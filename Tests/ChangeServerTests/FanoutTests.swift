import Foundation
import Testing

/// Limits that protect the server when many clients hold polls.
@Suite(.tags(.liveServer)) struct LiveFanoutTests {
    static func openDescriptors(_ pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    /// How many of `connections` the server listening on `port` has accepted: in `/proc/net/tcp` a connection
    /// still in the listen backlog has no socket inode yet, an accepted one has.
    static func acceptedCount(of connections: [HTTPConnection], by port: Int) -> Int {
        let clientPorts = Set(
            connections.map { connection in
                var address = sockaddr_in()
                var length = socklen_t(MemoryLayout<sockaddr_in>.size)
                withUnsafeMutablePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        _ = getsockname(connection.descriptor, $0, &length)
                    }
                }
                return Int(UInt16(bigEndian: address.sin_port))
            })
        // Read to the end: /proc files report a size of 0, which `String(contentsOfFile:)` believes.
        let bytes = FileHandle(forReadingAtPath: "/proc/net/tcp")?.readDataToEndOfFile() ?? Data()
        let table = String(decoding: bytes, as: UTF8.self)
        return table.split(separator: "\n").dropFirst().count { line in
            let fields = line.split(separator: " ")
            guard fields.count > 9, let local = fields[1].split(separator: ":").last,
                let remote = fields[2].split(separator: ":").last
            else { return false }
            return Int(local, radix: 16) == port && clientPorts.contains(Int(remote, radix: 16) ?? -1)
                && fields[9] != "0"
        }
    }

    /// Half the polls of each round vanish (their clients close) and are let go at once, the server watching their
    /// sockets for the hang-up; the other half time out. Nothing is left behind.
    @Test func vanishedAndTimedOutPollsLeakNothing() throws {
        let server = try ServerProcess()
        let version = try #require(
            try server.client.put("/v1/collections/c", ["sections": []]).object["version"] as? String)
        let baseline = Self.openDescriptors(server.process.processIdentifier)
        for _ in 0..<3 {
            var kept: [HTTPConnection] = []
            var vanishing: [HTTPConnection] = []
            for index in 0..<100 {
                let poll = try HTTPConnection(port: server.port)
                poll.sendRequest("GET", "/v1/collections/c/changes?since=\(version)&timeout=3")
                if index % 2 == 0 { kept.append(poll) } else { vanishing.append(poll) }
            }
            try waitForHeldPolls(server, 100)
            for poll in vanishing { poll.close() }
            try waitForHeldPolls(server, 50)
            for poll in kept { #expect(try poll.readResponse().status == 200) }
            kept.removeAll()
            try waitForHeldPolls(server, 0)
        }
        let pid = server.process.processIdentifier
        let released = waitUntil(timeout: 5) { Self.openDescriptors(pid) <= baseline }
        #expect(released, "\(Self.openDescriptors(pid)) descriptors open, \(baseline) before")
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
