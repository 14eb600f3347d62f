import Foundation
import ProcessSupport
import Synchronization
import Testing

/// Views moved back and forth between two sources while both are written through other servers: every server, and
/// one started afterwards, ends with the same views at the same versions, with the same history.
extension LivePostgresTests {
    /// Writers upsert into `zeta` and `alpha` through servers A and B while C moves view `v` between them 30 times.
    /// (Before a move locked the source it leaves, a write to that source that took its id before the move and
    /// committed after it was counted before the move on some servers and after it on others: 30 moves left the
    /// servers up to 16 versions apart.)
    @Test func aViewMovedWhileItsSourcesAreWrittenElsewhereHasOneVersionEverywhere() throws {
        let (cluster, url, servers) = try threeServersWithSources(database: "moving")
        defer { withExtendedLifetime(cluster) {} }
        let (a, b, c) = (servers[0], servers[1], servers[2])
        #expect(try c.client.put("/v1/views/v", ["source": "zeta"]).status == 201)
        try Self.writing([(a, "zeta"), (a, "alpha"), (b, "zeta"), (b, "alpha")]) { () throws in
            for move in 1...30 {
                #expect(try c.client.put("/v1/views/v", ["source": move % 2 == 0 ? "zeta" : "alpha"]).status == 200)
                usleep(40_000)
            }
        }
        try expectOneVersionEverywhere(of: ["v"], on: servers, url: url, movedAtLeast: 60)
    }

    /// Two servers move two views between the same sources at once (C moves `v`, B moves `w`) while all three
    /// write them. (A view record read and held here behind this server's own record once let the records after
    /// it, read by a later page, go first: one version apart now and then.)
    @Test func viewsMovedByTwoServersAtOnceHaveOneVersionEverywhere() throws {
        let (cluster, url, servers) = try threeServersWithSources(database: "movingtwo")
        defer { withExtendedLifetime(cluster) {} }
        let (a, b, c) = (servers[0], servers[1], servers[2])
        #expect(try c.client.put("/v1/views/v", ["source": "zeta"]).status == 201)
        #expect(try b.client.put("/v1/views/w", ["source": "zeta"]).status == 201)
        try Self.writing([(a, "zeta"), (a, "alpha"), (b, "zeta"), (c, "alpha")]) { () throws in
            let port = b.port
            let statuses = Mutex<[Int]>([])
            let mover = Thread {
                for move in 1...30 {
                    let status = try? Client(port: port).put(
                        "/v1/views/w", ["source": move % 2 == 0 ? "zeta" : "alpha"]
                    ).status
                    statuses.withLock { $0.append(status ?? 0) }
                    usleep(27_000)
                }
            }
            mover.start()
            for move in 1...30 {
                #expect(try c.client.put("/v1/views/v", ["source": move % 2 == 0 ? "zeta" : "alpha"]).status == 200)
                usleep(30_000)
            }
            while !mover.isFinished { usleep(10_000) }
            #expect(statuses.withLock { $0 } == Array(repeating: 200, count: 30))
        }
        try expectOneVersionEverywhere(of: ["v", "w"], on: servers, url: url, movedAtLeast: 60)
    }

    /// A cluster (stopped when let go), a database on it and three servers on that, with `zeta` and `alpha`
    /// created through the first and seen by all.
    private func threeServersWithSources(database: String) throws -> (PostgresCluster, String, [ServerProcess]) {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase(database)
        let servers = try (0..<3).map { _ in try ServerProcess(["--postgres", url]) }
        try Self.createSources(through: servers[0])
        for server in servers.dropFirst() {
            let seen = try eventually {
                try server.client.get("/v1/collections/zeta").status == 200
                    && server.client.get("/v1/collections/alpha").status == 200
            }
            #expect(seen, "the sources reached every server")
        }
        return (cluster, url, servers)
    }

    /// Runs `moves` while a client per target upserts eight items of its collection over and over through its
    /// server (bounded: 20,000 each), and expects every upsert to succeed.
    private static func writing(_ targets: [(ServerProcess, String)], while moves: () throws -> Void) throws {
        let moving = Atomic(true)
        let failures = Mutex<[String]>([])
        let writers = targets.enumerated().map { index, target in
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
        defer {
            moving.store(false, ordering: .relaxed)
            while writers.contains(where: { !$0.isFinished }) { usleep(10_000) }
        }
        try moves()
        moving.store(false, ordering: .relaxed)
        while writers.contains(where: { !$0.isFinished }) { usleep(10_000) }  // as the `defer`, before the check
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 }.prefix(3))")
    }

    /// Each view reads the same (version included) on every server as on the last one, and on a server started
    /// now, with the same history from three cursors; its version shows at least `movedAtLeast` changes.
    private func expectOneVersionEverywhere(
        of views: [String], on servers: [ServerProcess], url: String, movedAtLeast: Int
    ) throws {
        let reference = servers[servers.count - 1]
        let fresh = try ServerProcess(["--postgres", url])
        for view in views {
            // Read again from every server each time: the last one too may not have applied the others' last records
            // yet (a move can hold them for up to 2 s).
            var seen: [String] = []
            let agreed = try eventually {
                seen = try servers.map { try $0.client.get("/v1/views/\(view)").text }
                return Set(seen).count == 1
            }
            #expect(agreed, "\(view) differs between servers: \(seen.map { $0.prefix(120) })")
            let expected = try reference.client.get("/v1/views/\(view)").text
            #expect(
                try eventually { try fresh.client.get("/v1/views/\(view)").text == expected }, "\(view) after a restart"
            )
            let version = try #require(try reference.client.get("/v1/views/\(view)").object["version"] as? String)
            let parts = version.split(separator: ".")
            let (epoch, seq) = (String(parts[0]), Int(parts[1]) ?? 0)
            #expect(seq > movedAtLeast, "the writes and the moves changed \(view): \(version)")
            for since in [seq - 1, seq - 20, seq / 2] {
                let cursor = "/v1/views/\(view)/changes?since=\(epoch).\(since)&timeout=0"
                let history = try reference.client.get(cursor).text
                for server in servers.dropLast() + [fresh] {
                    #expect(try server.client.get(cursor).text == history, "\(cursor)")
                }
            }
        }
    }
}
