import Foundation
import ProcessSupport
import Synchronization
import Testing

/// A view moved back and forth between two sources while both are written through other servers: every server,
/// and one started afterwards, ends with the same view at the same version, with the same history.
extension LivePostgresTests {
    /// Writers upsert into `zeta` and `alpha` through servers A and B while C moves view `v` between them 30 times.
    /// (Before a move locked the source it leaves, a write to that source that took its id before the move and
    /// committed after it was counted before the move on some servers and after it on others: 30 moves left the
    /// servers versions apart.)
    @Test func aViewMovedWhileItsSourcesAreWrittenElsewhereHasOneVersionEverywhere() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("moving")
        let servers = try (0..<3).map { _ in try ServerProcess(["--postgres", url]) }
        let (a, b, c) = (servers[0], servers[1], servers[2])
        try Self.createSources(through: a)
        for server in [b, c] {
            let seen = try eventually {
                try server.client.get("/v1/collections/zeta").status == 200
                    && server.client.get("/v1/collections/alpha").status == 200
            }
            #expect(seen, "the sources reached every server")
        }
        #expect(try c.client.put("/v1/views/v", ["source": "zeta"]).status == 201)
        let moving = Atomic(true)
        let failures = Mutex<[String]>([])
        let writers = [(a, "zeta"), (a, "alpha"), (b, "zeta"), (b, "alpha")].enumerated().map { index, target in
            let (port, collection) = (target.0.port, target.1)
            return Thread {
                let client = Client(port: port)
                for step in 0..<20_000 where moving.load(ordering: .relaxed) {
                    let path = "/v1/collections/\(collection)/items/w\(index)-\(step % 8)"
                    do {
                        let status = try client.put(path, ["data": step]).status
                        if !(200..<300).contains(status) { failures.withLock { $0.append("\(path): \(status)") } }
                    } catch {
                        failures.withLock { $0.append("\(path): \(error)") }
                    }
                }
            }
        }
        for writer in writers { writer.start() }
        for move in 1...30 {
            let status = try c.client.put("/v1/views/v", ["source": move % 2 == 0 ? "zeta" : "alpha"]).status
            #expect(status == 200)
            usleep(40_000)
        }
        moving.store(false, ordering: .relaxed)
        while writers.contains(where: { !$0.isFinished }) { usleep(10_000) }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 }.prefix(3))")

        let expected = try c.client.get("/v1/views/v").text
        for (name, server) in [("A", a), ("B", b)] {
            let agreed = try eventually { try server.client.get("/v1/views/v").text == expected }
            let seen = try server.client.get("/v1/views/v").text
            #expect(agreed, "\(name): \(seen.prefix(120)), C: \(expected.prefix(120))")
        }
        let object = try c.client.get("/v1/views/v").object
        let version = try #require(object["version"] as? String)
        let parts = version.split(separator: ".")
        let (epoch, seq) = (String(parts[0]), Int(parts[1]) ?? 0)
        #expect(seq > 60, "the writes and the moves changed the view: \(version)")
        let fresh = try ServerProcess(["--postgres", url])
        #expect(try fresh.client.get("/v1/views/v").text == expected, "after a restart")
        for since in [seq - 1, seq - 20, seq / 2] {
            let cursor = "/v1/views/v/changes?since=\(epoch).\(since)&timeout=0"
            let history = try c.client.get(cursor).text
            for server in [a, b, fresh] { #expect(try server.client.get(cursor).text == history, "\(cursor)") }
        }
    }
}
