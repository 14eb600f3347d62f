import Foundation
import ProcessSupport
import Synchronization
import Testing

@testable import ChangeServer

/// Several real servers on one real PostgreSQL (`--postgres`), started by the tests on free loopback ports.
@Suite(.serialized, .tags(.liveServer)) struct LivePostgresTests {
    /// Two servers started at the same moment on an empty database both set up the schema (once, under the
    /// advisory lock) and serve; what one writes, the other serves. `--data-dir` is unused with `--postgres`: a disk
    /// reserve larger than any disk refuses nothing.
    @Test func twoServersCreateTheSchemaAtOnce() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("schema")
        let started = Mutex<[ServerProcess]>([])
        let failures = Mutex<[String]>([])
        let threads = (0..<2).map { _ in
            Thread {
                do {
                    let server = try ServerProcess(["--postgres", url, "--disk-reserve-bytes", "1125899906842624"])
                    started.withLock { $0.append(server) }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        for thread in threads { thread.start() }
        while threads.contains(where: { !$0.isFinished }) { usleep(10_000) }
        #expect(failures.withLock { $0 }.isEmpty)
        let servers = started.withLock { $0 }
        try #require(servers.count == 2)
        #expect(try cluster.sql("SELECT version FROM changeserver_schema", database: "schema") == "2\n")
        #expect(try servers[0].client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        let seen = try eventually { try servers[1].client.get("/v1/collections/c").status == 200 }
        #expect(seen)
        let health = try servers[1].client.get("/healthz")
        #expect(health.status == 200)
        #expect(health.text == #"{"status":"ok","store":{"backend":"postgres","state":"up"}}"#)
    }

    /// A database whose schema is newer than this server's is refused before anything is written to it: the
    /// refused start added its own version next to the newer one, and any column it thought missing.
    @Test func aNewerSchemaIsRefusedWithoutAWrite() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("newer")
        do {
            let server = try ServerProcess(["--postgres", url])
            #expect(try server.client.get("/healthz").status == 200)
        }
        _ = try cluster.sql("UPDATE changeserver_schema SET version = 3", database: "newer")
        let data = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: data) }
        let run = try ProgramRun.run(
            [
                ServerProcess.binary.path, "--postgres", url, "--host", "127.0.0.1", "--port",
                String(try ClosingListener.freePort()), "--data-dir", data,
            ], in: Repository.root, timeout: 60)
        #expect(run.status == 1, "\(run.output)")
        #expect(run.output.contains("the database's schema is version 3; this server knows version 2 only"))
        #expect(try cluster.sql("SELECT version FROM changeserver_schema ORDER BY version", database: "newer") == "3\n")
    }

    /// One server under 8 concurrent writers is killed with SIGKILL at a different moment each round; after a
    /// restart every acknowledged item is there and the version counts exactly the records committed (none lost,
    /// none applied twice).
    @Test func killNineLosesNoAcknowledgedMutation() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("kill")
        var server = try ServerProcess(["--postgres", url])
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        var acknowledged: [String: Int] = [:]
        for round in 0..<3 {
            let port = server.port
            let results = Mutex<[(String, Int)]>([])
            let stop = Atomic<Bool>(false)
            let threads = (0..<8).map { writer in
                Thread {
                    var sequence = 0
                    while !stop.load(ordering: .relaxed) && sequence < 2000 {
                        let id = "r\(round)-w\(writer)-\(sequence)"
                        sequence += 1
                        guard
                            let response = try? Client(port: port).put(
                                "/v1/collections/c/items/\(id)", ["data": sequence]),
                            response.status == 201
                        else { continue }
                        results.withLock { $0.append((id, sequence)) }
                    }
                }
            }
            for thread in threads { thread.start() }
            // Killed mid-load: once writes are being acknowledged (a busy machine may take a while to get there),
            // at a later moment each round.
            let loaded = Date().addingTimeInterval(30)
            while results.withLock({ $0.count }) < 50 && Date() < loaded { usleep(5_000) }
            usleep(UInt32(50_000 + round * 150_000))
            kill(server.process.processIdentifier, SIGKILL)
            server.process.waitUntilExit()
            stop.store(true, ordering: .relaxed)
            while threads.contains(where: { !$0.isFinished }) { usleep(5_000) }
            let thisRound = results.withLock { $0 }
            #expect(!thisRound.isEmpty, "round \(round): nothing was acknowledged before the kill")
            for (id, value) in thisRound { acknowledged[id] = value }

            server = try ServerProcess(["--postgres", url])
            let snapshot = ItemMirror(snapshot: try server.client.get("/v1/collections/c").object)
            let data = Dictionary(snapshot.items.map { ($0.id, $0.data) }) { first, _ in first }
            for (id, value) in acknowledged {
                #expect(data[id] == "\(value)", "round \(round): acknowledged \(id) lost")
            }
            // A transaction whose `COMMIT` the killed server had sent can commit after the restart has read the
            // database, without its `NOTIFY` (the backend ends when it cannot answer): the follower's catch-up,
            // every second, brings its records in. So the version is compared once it has caught up.
            var (records, seq, items) = (-1, -1, -1)
            _ = try waitUntil(timeout: 20) {
                let state = ItemMirror(snapshot: try server.client.get("/v1/collections/c").object)
                seq = state.version.split(separator: ".").last.flatMap { Int($0) } ?? -1
                items = state.items.count
                let last = try cluster.sql(
                    "SELECT last_seq FROM changeserver_collections WHERE name = 'c'", database: "kill")
                records = Int(last.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
                return seq >= records
            }
            #expect(records == seq, "round \(round)")
            #expect(items == seq - 1, "round \(round): one item per record after the creation")
        }
    }

    /// Three servers, 16 writers sending random mutations to random servers, a subscriber on every server and
    /// one that moves to another server at every poll: every mirror ends equal to the final snapshot, every
    /// acknowledged mutation is there, and every server has the same version, content and changesets.
    @Test func threeServersConverge() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("three")
        let servers = try (0..<3).map { _ in try ServerProcess(["--postgres", url]) }
        let run = try Workload(servers: servers)
        run.start(writers: 16, mutationsPerWriter: 40)
        run.waitForWriters()
        let final = try run.converge()
        let failures = run.stopSubscribers(at: final.version)
        #expect(failures.isEmpty, "\(failures.prefix(5))")
        #expect(run.unacknowledged == 0)
        run.checkAcknowledged(in: final)
        for mirror in run.mirrors { #expect(mirror == final) }
        // The same changesets everywhere, from several cursors.
        let epoch = final.version.split(separator: ".").first.map(String.init) ?? ""
        for seq in [1, 100, 400] {
            let answers = try servers.map {
                try $0.client.get("/v1/collections/c/changes?since=\(epoch).\(seq)&timeout=0").text
            }
            #expect(Set(answers).count == 1, "changes since \(seq) differ between servers")
        }
    }

    /// Under the same load, one server is killed with SIGKILL and started again, then PostgreSQL itself is
    /// restarted (`pg_ctl restart -m fast`): nothing acknowledged is lost, nothing is applied twice (every server,
    /// and a fresh one that replays the database, ends with the same version and content), `503` comes only while
    /// the database is down, and the servers say so in `/healthz` meanwhile.
    @Test func killAndDatabaseRestartUnderLoad() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("faults")
        var servers = try (0..<3).map { _ in try ServerProcess(["--postgres", url]) }
        let run = try Workload(servers: servers)
        run.start(writers: 16, mutationsPerWriter: 300, pause: 10_000)
        usleep(500_000)
        kill(servers[2].process.processIdentifier, SIGKILL)
        servers[2].process.waitUntilExit()
        usleep(300_000)
        servers[2] = try ServerProcess(["--postgres", url])
        run.replace(server: 2, port: servers[2].port)
        usleep(300_000)
        let before = run.unavailable
        let restartStarted = Date()
        try cluster.restart()
        let restartEnded = Date()
        #expect(try servers[0].client.get("/healthz").status == 200)
        run.waitForWriters()
        // The database is the truth: a fresh server replays it, and every running server must come to the same.
        let fresh = try ServerProcess(["--postgres", url])
        let replayed = ItemMirror(snapshot: try fresh.client.get("/v1/collections/c").object)
        let final = try run.converge(to: replayed)
        let failures = run.stopSubscribers(at: final.version)
        #expect(failures.isEmpty, "\(failures.prefix(5))")
        // After the restart, reconnecting waits up to 2 s between tries, and a loaded machine adds its delays.
        let late = run.unavailableTimes.filter {
            $0 < restartStarted.addingTimeInterval(-0.5) || $0 > restartEnded.addingTimeInterval(10)
        }
        #expect(late.isEmpty, "503 while the database was up: \(late.count) times; \(before) before the restart")
        #expect(run.unavailable > before, "no mutation met the database down")
        run.checkAcknowledged(in: final)
        for server in servers {
            let metrics = try server.client.get("/metrics").text
            #expect(metrics.contains("changeserver_store_up 1"))
            // The writer's connection and the follower's were each made again once (the writer's perhaps twice:
            // the follower's first failed try has it drop one it may have made already).
            let reconnects = metrics.split(separator: "\n").first {
                $0.hasPrefix("changeserver_store_reconnects_total ")
            }
            let count = reconnects.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
            #expect((2...3).contains(count), "\(reconnects ?? "no reconnects line")")
        }
    }

    /// With `--snapshot-bytes 4096`, a collection is snapshotted into PostgreSQL as it grows and the records
    /// before the snapshot (but the last 1,000) are deleted; a server started afterwards starts from the snapshot
    /// and the records after it, and serves the same content, version and feed history as the running one.
    @Test func snapshotsCompactTheRecords() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("snapshots")
        let server = try ServerProcess(["--postgres", url, "--snapshot-bytes", "4096"])
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        let port = server.port
        let accepted = Atomic<Int>(0)
        let threads = (0..<8).map { writer in
            Thread {
                for step in 0..<200 {
                    let response = try? Client(port: port).put(
                        "/v1/collections/c/items/w\(writer)-\(step % 50)", ["data": step])
                    if response.map({ (200..<300).contains($0.status) }) == true {
                        accepted.add(1, ordering: .relaxed)
                    }
                }
            }
        }
        for thread in threads { thread.start() }
        while threads.contains(where: { !$0.isFinished }) { usleep(10_000) }
        #expect(accepted.load(ordering: .relaxed) == 1600)
        let query =
            "SELECT (SELECT seq FROM changeserver_snapshots WHERE collection = 'c') || ' ' || "
            + "(SELECT count(*) FROM changeserver_records WHERE collection = 'c')"
        var snapshotSeq = 0
        var remaining = 0
        let deadline = Date().addingTimeInterval(10)
        repeat {
            let fields = try cluster.sql(query, database: "snapshots").split(whereSeparator: \.isWhitespace)
            snapshotSeq = fields.first.flatMap { Int($0) } ?? 0
            remaining = fields.dropFirst().first.flatMap { Int($0) } ?? 0
            if snapshotSeq > 1000 && remaining < 1601 { break }
            usleep(50_000)
        } while Date() < deadline
        #expect(snapshotSeq > 1000, "no snapshot past the kept records")
        #expect(remaining == 1601 - (snapshotSeq - 1000), "records before the snapshot (but 1,000) deleted")
        let running = try server.client.get("/v1/collections/c")
        let fresh = try ServerProcess(["--postgres", url])
        #expect(fresh.log.contains("1 from snapshots"))
        let started = try fresh.client.get("/v1/collections/c")
        #expect(ItemMirror(snapshot: started.object) == ItemMirror(snapshot: running.object))
        let epoch = ItemMirror(snapshot: running.object).version.split(separator: ".").first.map(String.init) ?? ""
        let feed = "/v1/collections/c/changes?since=\(epoch).1500&timeout=0"
        #expect(try fresh.client.get(feed).text == server.client.get(feed).text)
    }

    /// 64 collections written at once, each past `--snapshot-bytes` with its first write, all need a snapshot at
    /// the same moment: they are written one after another on one connection (the housekeeper's), so the server
    /// never holds more than three (writer, follower, housekeeper) and goes back to two when they are done. The
    /// database allows 8 here: a connection per snapshot would be refused, and those snapshots lost until their
    /// collections grew again.
    @Test func snapshotsAtOnceShareOneConnection() throws {
        let cluster = try PostgresCluster(maxConnections: 8)
        let url = try cluster.createDatabase("housekeeping")
        let server = try ServerProcess(["--postgres", url, "--snapshot-bytes", "4096"])
        let port = server.port
        let created = Atomic<Int>(0)
        let threads = (0..<64).map { index in
            Thread {
                let items = (0..<50).map { ["id": "i\($0)", "data": String(repeating: "x", count: 100)] }
                let response = try? Client(port: port).put(
                    "/v1/collections/c\(index)", ["sections": [["id": "s", "items": items]]])
                if response?.status == 201 { created.add(1, ordering: .relaxed) }
            }
        }
        let connections = "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'changeserver %'"
        var most = 0
        var snapshots = 0
        for thread in threads { thread.start() }
        let deadline = Date().addingTimeInterval(30)
        repeat {
            most = max(most, Int(try cluster.sql(connections).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0)
            snapshots =
                Int(
                    try cluster.sql("SELECT count(*) FROM changeserver_snapshots", database: "housekeeping")
                        .trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            if snapshots == 64 && !threads.contains(where: { !$0.isFinished }) { break }
            usleep(5_000)
        } while Date() < deadline
        #expect(created.load(ordering: .relaxed) == 64)
        #expect(snapshots == 64, "every collection snapshotted")
        #expect(most <= 3, "at most writer, follower and housekeeper")
        #expect(!server.log.contains("failed"), "no snapshot refused a connection")
        // The server counts a snapshot once its commit has returned, a moment after the database shows it.
        let lines = [
            "changeserver_store_snapshots_total 64", "changeserver_store_snapshot_failures_total 0",
            "changeserver_store_housekeeping_jobs 0",
        ]
        var metrics = ""
        _ = try eventually {
            metrics = try server.client.get("/metrics").text
            return lines.allSatisfy { metrics.contains($0 + "\n") }
        }
        for line in lines { #expect(metrics.contains(line + "\n"), "\(line)") }
        #expect(
            try eventually {
                try cluster.sql(connections).trimmingCharacters(in: .whitespacesAndNewlines) == "2"
            }, "the housekeeper's connection closed once idle")
        #expect(try server.client.put("/v1/collections/c0/items/after", ["data": 1]).status == 201)
        #expect(server.process.isRunning)
    }

    /// A view is defined and redefined through A while its source is written through B: both servers hold the
    /// same view versions, content and history (its records are sequenced with its source's), and so do servers
    /// started afterwards from the snapshot B took of the source with its view and the records after it.
    @Test func viewsHaveTheSameVersionsOnEveryServerAndAfterARestart() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("views")
        let a = try ServerProcess(["--postgres", url])
        let b = try ServerProcess(["--postgres", url, "--snapshot-bytes", "4096"])
        #expect(try a.client.put("/v1/collections/tasks", ["sections": [["id": "s"]]]).status == 201)
        #expect(try eventually { try b.client.get("/v1/collections/tasks").status == 200 })
        let port = b.port
        let failures = Mutex<[String]>([])
        let writer = Thread {
            for step in 0..<1500 {
                let data: [String: Any] = ["p": step % 7, "g": step % 3]
                do {
                    let response = try Client(port: port).put(
                        "/v1/collections/tasks/items/t\(step % 40)", ["data": data])
                    if !(200..<300).contains(response.status) {
                        failures.withLock { $0.append("\(response.status) \(response.text)") }
                    }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        writer.start()
        for round in 0..<8 {
            let definition: [String: Any] = [
                "source": "tasks", "sectionBy": ["field": "/g"],
                "sortBy": [["field": "/p", "order": round % 2 == 0 ? "asc" : "desc"]],
            ]
            let status = try a.client.put("/v1/views/board", definition).status
            #expect(status == (round == 0 ? 201 : 200))
            usleep(30_000)
        }
        while !writer.isFinished { usleep(10_000) }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 }.prefix(3))")
        let onB = try b.client.get("/v1/views/board")
        let settled = try eventually { try a.client.get("/v1/views/board").text == onB.text }
        let onA = try a.client.get("/v1/views/board")
        #expect(settled, "A: \(onA.text.prefix(300)) B: \(onB.text.prefix(300))")
        let version = try #require(onB.object["version"] as? String)
        let parts = version.split(separator: ".")
        let (epoch, seq) = (String(parts[0]), Int(parts[1]) ?? 0)
        #expect(seq > 8, "the source's writes moved the view: \(version)")
        let cursors = [seq - 1, seq / 2, 1].map { "/v1/views/board/changes?since=\(epoch).\($0)&timeout=0" }
        for cursor in cursors { #expect(try a.client.get(cursor).text == b.client.get(cursor).text, "\(cursor)") }

        let snapshotted = try cluster.sql(
            "SELECT count(*) FROM changeserver_snapshots WHERE collection = 'tasks'", database: "views")
        #expect(snapshotted == "1\n", "B snapshotted the source with its view")
        let fresh = try ServerProcess(["--postgres", url])
        #expect(try fresh.client.get("/v1/views/board").text == onB.text)
        for cursor in cursors { #expect(try fresh.client.get(cursor).text == b.client.get(cursor).text, "\(cursor)") }
    }

    /// A start whose connection the database ends on the way (a restart or failover of the database while the
    /// server sets up the schema or replays) tries again, as it does when the database cannot be reached: it ended
    /// at once, with exit status 1. Here the server waits on the schema's advisory lock, held by the test, when its
    /// backend is terminated; then the lock's holder is too.
    @Test func aStartWhoseConnectionIsLostTriesAgain() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("startlost")
        let holder = Thread {
            _ = try? cluster.sql(
                "SELECT pg_advisory_lock(\(PostgresSchema.setupLock)); SELECT pg_sleep(60)", database: "startlost")
        }
        holder.start()
        #expect(
            try eventually {
                try cluster.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")
                    .trimmingCharacters(in: .whitespacesAndNewlines) == "1"
            })
        let terminated = Mutex(0)
        let terminator = Thread {
            let waiting =
                "FROM pg_stat_activity WHERE application_name = 'changeserver recovery' AND wait_event_type = 'Lock'"
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline {
                let count = (try? cluster.sql("SELECT count(pg_terminate_backend(pid)) \(waiting)")) ?? ""
                if let ended = Int(count.trimmingCharacters(in: .whitespacesAndNewlines)), ended > 0 {
                    terminated.withLock { $0 += ended }
                    // Then the lock goes with its holder's session, and the start's next try takes it.
                    _ = try? cluster.sql(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'psql' "
                            + "AND pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)")
                    return
                }
                usleep(50_000)
            }
        }
        terminator.start()
        // Whatever happens, the threads end before the test does, so that the cluster they hold is stopped with it
        // (a start that gave up left the holder asleep, and the cluster running past the test process).
        defer {
            _ = try? cluster.sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'psql' "
                    + "AND pid <> pg_backend_pid()")
            while !holder.isFinished || !terminator.isFinished { usleep(10_000) }
        }
        let server = try ServerProcess(["--postgres", url])
        #expect(terminated.withLock { $0 } == 1, "\(server.log)")
        #expect(server.log.contains("the start lost its PostgreSQL connection"), "\(server.log)")
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
    }

    /// A snapshot that failed (here its table renamed away; a full disk for the operator who found it) is tried again
    /// with a growing wait, also when its collection is not written again: it was tried again only once the
    /// collection grew by `--snapshot-bytes` more, and a collection never written again kept its records for good.
    @Test func aFailedSnapshotIsTriedAgainWithoutAnotherWrite() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("retry")
        let server = try ServerProcess(["--postgres", url, "--snapshot-bytes", "4096"])
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        try cluster.sql("ALTER TABLE changeserver_snapshots RENAME TO snapshots_away", database: "retry")
        let padding = String(repeating: "p", count: 5000)
        #expect(try server.client.put("/v1/collections/c/items/a", ["data": padding]).status == 201)
        #expect(waitUntil(timeout: 20) { server.log.contains("snapshot of c failed") }, "\(server.log.suffix(2000))")
        try cluster.sql("ALTER TABLE snapshots_away RENAME TO changeserver_snapshots", database: "retry")
        let stored = try eventually {
            try cluster.sql("SELECT count(*) FROM changeserver_snapshots WHERE collection = 'c'", database: "retry")
                .trimmingCharacters(in: .whitespacesAndNewlines) == "1"
        }
        #expect(stored, "\(server.log.suffix(2000))")
        #expect(server.log.contains("it will be tried again in 1 s"), "\(server.log.suffix(2000))")
    }

    /// A database that lost commits it had acknowledged (here its records and `last_seq` taken back by hand, as a
    /// crash under `synchronous_commit = off` or a failover to a replica behind does) is noticed by the next
    /// catch-up: the server stops with exit status 75 and says why, where it went on serving versions the database
    /// no longer had, and the writes after took their sequences again and were never answered. Started again, it
    /// serves what the database holds.
    @Test func aDatabaseThatLostAcknowledgedCommitsStopsTheServer() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("lost")
        let server = try ServerProcess(["--postgres", url])
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        for step in 0..<5 {
            #expect(try server.client.put("/v1/collections/c/items/i\(step)", ["data": step]).status == 201)
        }
        _ = try cluster.sql(
            "BEGIN; DELETE FROM changeserver_records WHERE collection = 'c' AND seq > 3; "
                + "UPDATE changeserver_collections SET last_seq = 3 WHERE name = 'c'; COMMIT", database: "lost")
        // The catch-up runs every second.
        #expect(server.waitForExit(timeout: 15) == 75, "\(server.log.suffix(2000))")
        #expect(server.log.contains("the database lost commits it had acknowledged"), "\(server.log.suffix(2000))")
        let restarted = try ServerProcess(["--postgres", url])
        let snapshot = try restarted.client.get("/v1/collections/c")
        let sections = snapshot.object["sections"] as? [[String: Any]]
        #expect((sections?.first?["items"] as? [Any])?.count == 2, "\(snapshot.text)")
    }

    /// A server that was cut off (stopped with SIGSTOP) while another wrote past a snapshot and compacted the
    /// records it had not read cannot catch up: it stops with exit status 75 instead of serving stale data, and
    /// started again it serves what the other one does.
    @Test func aServerThatFellBehindACompactionStopsAndStartsAgainFromTheSnapshot() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("behind")
        let writer = try ServerProcess(["--postgres", url, "--snapshot-bytes", "4096"])
        let behind = try ServerProcess(["--postgres", url])
        #expect(try writer.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        #expect(try eventually { try behind.client.get("/v1/collections/c").status == 200 })
        kill(behind.process.processIdentifier, SIGSTOP)
        let port = writer.port
        let threads = (0..<8).map { thread in
            Thread {
                for step in 0..<200 {
                    _ = try? Client(port: port).put("/v1/collections/c/items/w\(thread)-\(step)", ["data": step])
                }
            }
        }
        for thread in threads { thread.start() }
        while threads.contains(where: { !$0.isFinished }) { usleep(10_000) }
        let compacted = try eventually {
            let oldest = try cluster.sql(
                "SELECT min(seq) FROM changeserver_records WHERE collection = 'c'", database: "behind")
            return (Int(oldest.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) > 2
        }
        #expect(compacted, "the writer snapshotted and compacted past the stopped server's position")
        kill(behind.process.processIdentifier, SIGCONT)
        #expect(behind.waitForExit(timeout: 10) == 75, "\(behind.log)")
        #expect(behind.log.contains("compacted into a snapshot before this server read them"))
        let restarted = try ServerProcess(["--postgres", url])
        let expected = ItemMirror(snapshot: try writer.client.get("/v1/collections/c").object)
        #expect(ItemMirror(snapshot: try restarted.client.get("/v1/collections/c").object) == expected)
    }

    /// A server's sessions are ended by the database when left idle inside a transaction (a server frozen between
    /// a commit's round trips held its collections' rows, and every other server's writes to them, for good).
    @Test func sessionsIdleInATransactionAreEndedByTheDatabase() throws {
        let cluster = try PostgresCluster()
        let connection = try PGConnection(try cluster.createDatabase("idle"))
        let setting = try connection.execute("SHOW idle_in_transaction_session_timeout")
        #expect(setting.string(0, 0) == PGConnection.idleInTransactionTimeout)
    }

    /// A database that ends idle sessions (`idle_session_timeout`, here set for the database) does not end a
    /// server's: its sessions turn the limit off, and a write after an idle while succeeds (each one answered `503`
    /// and the store flapped down, the writer's idle connection having been ended).
    @Test func writesAfterAnIdleWhileSucceedWhereTheDatabaseEndsIdleSessions() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("idlesessions")
        try cluster.sql("ALTER DATABASE idlesessions SET idle_session_timeout = '2s'")
        #expect(try PGConnection(url).execute("SHOW idle_session_timeout").string(0, 0) == "0")
        let server = try ServerProcess(["--postgres", url])
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        for step in 0..<2 {
            usleep(3_500_000)
            let response = try server.client.put("/v1/collections/c/items/i\(step)", ["data": step])
            #expect(response.status == 201, "\(response.text)")
        }
        #expect(!server.log.contains("idle-session timeout"), "\(server.log.suffix(1000))")
    }

    /// Where the URL's `options` replace the server's (so idle sessions are ended after 2 s, which its follower's
    /// checks every second keep away from), the writer's connection, idle for longer, is found ended when a write
    /// comes: the batch, of which nothing was committed, is sent again on a new connection, and succeeds (it was
    /// answered `503`).
    @Test func aBatchMeetingAConnectionEndedWhileIdleIsSentAgain() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("idleended")
        try cluster.sql("ALTER DATABASE idleended SET idle_session_timeout = '2s'")
        let server = try ServerProcess(["--postgres", url + "?options=-c%20client_min_messages%3Dwarning"])
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        for step in 0..<2 {
            usleep(3_500_000)
            let response = try server.client.put("/v1/collections/c/items/i\(step)", ["data": step])
            #expect(response.status == 201, "\(response.text)")
        }
        #expect(server.log.contains("idle-session timeout"), "the database did end the writer's idle session")
        #expect(server.log.contains("sending the batch again"), "\(server.log.suffix(1000))")
        #expect(try server.client.get("/metrics").text.contains("changeserver_store_up 1\n"))
    }

    /// A server starting while another writes, snapshots and compacts reads one consistent state of the database:
    /// its snapshot and the records after it (it once read them apart, and a snapshot written between the two
    /// reads made it refuse to start: "lacks records").
    @Test func serversStartWhileAnotherSnapshotsAndCompacts() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("starts")
        let writer = try ServerProcess(["--postgres", url, "--snapshot-bytes", "4096"])
        for index in 0..<4 {
            #expect(try writer.client.put("/v1/collections/c\(index)", ["sections": [["id": "s"]]]).status == 201)
        }
        let port = writer.port
        let stop = Atomic<Bool>(false)
        let threads = (0..<8).map { thread in
            Thread {
                for step in 0..<3000 where !stop.load(ordering: .relaxed) {
                    _ = try? Client(port: port).put(
                        "/v1/collections/c\(thread % 4)/items/w\(thread)-\(step)", ["data": step])
                }
            }
        }
        for thread in threads { thread.start() }
        defer {
            stop.store(true, ordering: .relaxed)
            while threads.contains(where: { !$0.isFinished }) { usleep(10_000) }
        }
        let snapshotted = try eventually {
            let count = try cluster.sql(
                "SELECT count(*) FROM changeserver_snapshots WHERE content IS NOT NULL", database: "starts")
            return (Int(count.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) > 0
        }
        #expect(snapshotted, "the writer snapshots as it writes")
        for _ in 0..<6 {
            let starting = try ServerProcess(["--postgres", url])
            #expect(try starting.client.get("/healthz").status == 200, "\(starting.log)")
            _ = starting.stop()
        }
    }

    /// A server with no writes notices an outage through its follower: its store is reported down while the
    /// database is (it once said "up" throughout), and the first write after the outage succeeds (it once met the
    /// writer's dead connection and got 503).
    @Test func anIdleServerReportsAnOutageAndWritesRightAfterIt() throws {
        let cluster = try PostgresCluster()
        let server = try ServerProcess(["--postgres", try cluster.createDatabase("outage")])
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        cluster.stop()
        #expect(cluster.postmasterPID == nil, "the database did not stop")
        #expect(
            try eventually { try server.client.get("/metrics").text.contains("changeserver_store_up 0\n") },
            "\(server.log.split(separator: "\n").filter { !$0.contains("GET /metrics") }.suffix(30))")
        try cluster.start()
        #expect(try eventually { try server.client.get("/metrics").text.contains("changeserver_store_up 1\n") })
        #expect(try server.client.put("/v1/collections/c/items/a", ["data": 1]).status == 201)
    }

    /// An event stream whose `Last-Event-ID` comes from a server that applied more than this one yet is followed
    /// from there once this one catches up, as a held poll is: never `gone` (it once was, at once).
    @Test func aStreamAheadOfItsServerWaitsForIt() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("ahead")
        let a = try ServerProcess(["--postgres", url])
        let b = try ServerProcess(["--postgres", url])
        #expect(try a.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        #expect(try eventually { try b.client.get("/v1/collections/c").status == 200 })
        kill(b.process.processIdentifier, SIGSTOP)
        var ahead = ""
        for step in 0..<3 {
            ahead = try #require(
                try a.client.put("/v1/collections/c/items/i\(step)", ["data": step]).object["version"] as? String)
        }
        let resume = Thread {
            usleep(300_000)
            kill(b.process.processIdentifier, SIGCONT)
        }
        resume.start()
        let stream = try EventStreamReader(
            port: b.port, path: "/v1/collections/c/changes", headers: ["Last-Event-ID": ahead])
        #expect(stream.status == 200)
        let last = try #require(
            try a.client.put("/v1/collections/c/items/last", ["data": 0]).object["version"] as? String)
        let event = try #require(try stream.nextEvent())
        #expect(event.name == "changes", "\(event.data)")
        #expect(event.object["from"] as? String == ahead)
        #expect(event.object["to"] as? String == last)
    }

    /// A deleted collection's records leave the database after `--purge-delay-seconds`, once a snapshot at its
    /// deletion (holding the view it fed) covers them; another server and a fresh one serve the same afterwards,
    /// and the name written again goes on from there. A collection still there keeps its records.
    @Test func aDeletedCollectionsRecordsArePurged() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("purge")
        let a = try ServerProcess(["--postgres", url, "--purge-delay-seconds", "1"])
        let b = try ServerProcess(["--postgres", url, "--purge-delay-seconds", "1"])
        for name in ["gone", "kept"] {
            #expect(try a.client.put("/v1/collections/\(name)", ["sections": [["id": "s"]]]).status == 201)
            for step in 0..<20 {
                #expect(try a.client.put("/v1/collections/\(name)/items/i\(step)", ["data": step]).status == 201)
            }
        }
        #expect(try a.client.put("/v1/views/top", ["source": "gone", "limit": 5]).status == 201)
        #expect(try a.client.request("DELETE", "/v1/collections/gone").status == 204)
        let count = "SELECT count(*) FROM changeserver_records WHERE collection = "
        let purged = try eventually {
            try cluster.sql(count + "'gone'", database: "purge") == "0\n"
        }
        #expect(purged, "the deleted collection's records are purged")
        #expect(try cluster.sql(count + "'kept'", database: "purge") == "21\n")
        #expect(try b.client.get("/v1/collections/gone").status == 404)
        let view = try a.client.get("/v1/views/top")
        #expect(try eventually { try b.client.get("/v1/views/top").text == view.text })
        let fresh = try ServerProcess(["--postgres", url])
        #expect(try fresh.client.get("/v1/collections/gone").status == 404)
        #expect(try fresh.client.get("/v1/views/top").text == view.text)
        #expect(try a.client.put("/v1/collections/gone", ["sections": [["id": "again"]]]).status == 201)
        let again = try a.client.get("/v1/collections/gone").text
        #expect(try eventually { try b.client.get("/v1/collections/gone").text == again })
        #expect(try eventually { try fresh.client.get("/v1/collections/gone").text == again })
        #expect(b.process.isRunning && fresh.process.isRunning)
    }

    /// A purge that fails while the database is down is tried again once it is back, by the same server: it was
    /// put off until the next start, and a server that ran on kept the deleted collection's rows for good.
    @Test func aPurgeThatFailedIsTriedAgain() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("retry")
        let server = try ServerProcess(["--postgres", url, "--purge-delay-seconds", "2", "--log-level", "info"])
        #expect(try server.client.put("/v1/collections/gone", ["sections": [["id": "s"]]]).status == 201)
        for step in 0..<5 {
            #expect(try server.client.put("/v1/collections/gone/items/i\(step)", ["data": step]).status == 201)
        }
        #expect(try server.client.request("DELETE", "/v1/collections/gone").status == 204)
        #expect(try eventually { server.log.contains("snapshot of gone") }, "\(server.log.suffix(1500))")
        cluster.stop()
        let failed = try eventually { server.log.contains("purging the records of deleted collections failed") }
        #expect(failed, "\(server.log.suffix(1500))")
        #expect(server.log.contains("warning purging the records of deleted collections failed"))
        #expect(server.log.contains("tried again in "))
        try cluster.start()
        let count = "SELECT count(*) FROM changeserver_records WHERE collection = 'gone'"
        #expect(try eventually { try cluster.sql(count, database: "retry") == "0\n" }, "\(server.log.suffix(1500))")
        // Logged once the purge is done, by the log's thread a moment later.
        #expect(try eventually { server.log.contains("records of the deleted collection gone up to 7 purged (after ") })
        #expect(server.process.isRunning)
    }

    /// Records of collections deleted by a server that stopped before purging them are purged by the next server
    /// to start, which serves the same as before: one snapshotted at its deletion, and one whose snapshot was never
    /// stored (its row is removed here, as a stop right after the deletion leaves it).
    @Test func leftoverRecordsOfADeletedCollectionArePurgedAtTheNextStart() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("leftover")
        let first = try ServerProcess(["--postgres", url, "--purge-delay-seconds", "3600"])
        for name in ["snapshotted", "unsnapshotted"] {
            #expect(try first.client.put("/v1/collections/\(name)", ["sections": [["id": "s"]]]).status == 201)
            #expect(try first.client.put("/v1/collections/\(name)/items/a", ["data": 1]).status == 201)
            #expect(try first.client.request("DELETE", "/v1/collections/\(name)").status == 204)
        }
        let snapshots = "SELECT count(*) FROM changeserver_snapshots"
        #expect(try eventually { try cluster.sql(snapshots, database: "leftover") == "2\n" })
        #expect(first.stop() == 0)
        _ = try cluster.sql(
            "DELETE FROM changeserver_snapshots WHERE collection = 'unsnapshotted'", database: "leftover")
        let count = "SELECT count(*) FROM changeserver_records"
        #expect(try cluster.sql(count, database: "leftover") == "6\n")
        let next = try ServerProcess(["--postgres", url, "--purge-delay-seconds", "0"])
        #expect(try eventually { try cluster.sql(count, database: "leftover") == "0\n" })
        #expect(try cluster.sql(snapshots, database: "leftover") == "2\n")
        for name in ["snapshotted", "unsnapshotted"] {
            #expect(try next.client.get("/v1/collections/\(name)").status == 404)
            #expect(try next.client.put("/v1/collections/\(name)", ["sections": []]).status == 201)
        }
        let restarted = try ServerProcess(["--postgres", url])
        for name in ["snapshotted", "unsnapshotted"] {
            #expect(
                try restarted.client.get("/v1/collections/\(name)").text
                    == next.client.get("/v1/collections/\(name)").text)
        }
    }

    /// A server that was cut off while another deleted a collection and purged its records finds none left to read:
    /// it stops with exit status 75 rather than serve the collection for good, as after any compaction it missed.
    @Test func aServerThatMissedAPurgeStopsInsteadOfServingTheDeletedCollection() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("missed")
        let writer = try ServerProcess(["--postgres", url, "--purge-delay-seconds", "0"])
        let behind = try ServerProcess(["--postgres", url])
        #expect(try writer.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        #expect(try eventually { try behind.client.get("/v1/collections/c").status == 200 })
        kill(behind.process.processIdentifier, SIGSTOP)
        #expect(try writer.client.request("DELETE", "/v1/collections/c").status == 204)
        let count = "SELECT count(*) FROM changeserver_records WHERE collection = 'c'"
        #expect(try eventually { try cluster.sql(count, database: "missed") == "0\n" })
        kill(behind.process.processIdentifier, SIGCONT)
        #expect(behind.waitForExit(timeout: 10) == 75, "\(behind.log)")
        let restarted = try ServerProcess(["--postgres", url])
        #expect(try restarted.client.get("/v1/collections/c").status == 404)
    }

    /// A database that stops answering in the middle of a commit (every PostgreSQL process frozen with SIGSTOP:
    /// the connections stay up, so no keepalive notices) does not hold a server's stop up for good: it exits 0 within
    /// its bounds, the write in flight unanswered; once the database is back, a new server holds it or not, whole.
    /// (The stop waited in the journal's flush, before the HTTP stop even began, until the process was killed.)
    @Test func aStopDoesNotWaitForAFrozenDatabase() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("frozen")
        let server = try ServerProcess(["--postgres", url])
        let (frozen, write) = try Self.freezeUnderAWrite(cluster, server)
        defer { for pid in frozen { kill(pid, SIGCONT) } }
        // The write waits for its commit, its body (`{"data":1}`) held until it is answered.
        #expect(waitUntil(timeout: 20) { (try? server.metric("changeserver_body_bytes_in_flight")) == 10 })
        let stopped = Date()
        #expect(server.stop(timeout: 40) == 0, "\(server.log.suffix(2000))")
        let took = Date().timeIntervalSince(stopped)
        #expect(took < 25, "the stop took \(took) s")
        #expect(
            server.log.contains(
                "PostgreSQL does not answer (or a snapshot is still being written): stopping without waiting for it any longer"
            ))
        while !write.isFinished { usleep(10_000) }
        #expect(write.status == nil, "the write in flight was answered \(String(describing: write.status))")
        for pid in frozen { kill(pid, SIGCONT) }
        let restarted = try ServerProcess(["--postgres", url])
        let snapshot = try restarted.client.get("/v1/collections/c").object
        let items = ((snapshot["sections"] as? [[String: Any]])?.first?["items"] as? [[String: Any]]) ?? []
        let seq = (snapshot["version"] as? String)?.split(separator: ".").last.flatMap { Int($0) }
        #expect(seq == 1 + items.count, "the version counts the write exactly when it is there: \(snapshot)")
    }

    /// A database that stops answering without closing its connections (frozen with `SIGSTOP`: the kernel still
    /// acknowledges, so no keepalive notices) takes the store down once a commit has waited `--postgres-timeout`:
    /// new mutations get `503` at once and `/healthz` says "down", where they once waited with no bound while it
    /// said "up". The mutation the frozen commit holds is answered once the database answers, and the store is up.
    @Test func aFrozenDatabaseTakesTheStoreDownAfterItsTimeout() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("stalled")
        let server = try ServerProcess(["--postgres", url, "--postgres-timeout", "2"])
        let (frozen, write) = try Self.freezeUnderAWrite(cluster, server)
        defer { for pid in frozen { kill(pid, SIGCONT) } }
        let frozenAt = Date()
        #expect(try eventually { try server.client.get("/healthz").text.contains(#""state":"down""#) })
        let tookDown = Date().timeIntervalSince(frozenAt)
        #expect(tookDown >= 1.5 && tookDown < 10, "the store went down after \(tookDown) s")
        #expect(try server.client.get("/metrics").text.contains("changeserver_store_up 0\n"))
        let refused = try server.client.put("/v1/collections/c/items/b", ["data": 2])
        #expect(refused.status == 503)
        #expect(refused.errorCode == "storage_unavailable")
        #expect(server.log.contains("PostgreSQL has not answered a commit for"))
        #expect(write.status == nil, "the frozen commit's mutation waits for its outcome")
        for pid in frozen { kill(pid, SIGCONT) }
        #expect(try eventually { write.status == 201 })
        #expect(try eventually { try server.client.get("/healthz").text.contains(#""state":"up""#) })
        #expect(try server.client.put("/v1/collections/c/items/c", ["data": 3]).status == 201)
        let snapshot = try server.client.get("/v1/collections/c").object
        let items = ((snapshot["sections"] as? [[String: Any]])?.first?["items"] as? [[String: Any]]) ?? []
        #expect(items.compactMap { $0["id"] as? String } == ["a", "c"])
    }

    /// Creates collection `c` through `server`, freezes the cluster's processes (`SIGSTOP`; the caller thaws them with
    /// `SIGCONT`), then puts item `a` on a thread of its own.
    private static func freezeUnderAWrite(_ cluster: PostgresCluster, _ server: ServerProcess) throws
        -> (frozen: [pid_t], write: BackgroundPut)
    {
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        let postmaster = try #require(cluster.postmasterPID)
        let frozen = [postmaster] + children(of: postmaster)
        for pid in frozen { kill(pid, SIGSTOP) }
        return (frozen, BackgroundPut(port: server.port, "/v1/collections/c/items/a", ["data": 1]))
    }

    /// A `PUT` sent on a thread of its own, its status kept (nil while unanswered, or when it got none).
    final class BackgroundPut: Sendable {
        private let answer = Mutex<(status: Int?, isFinished: Bool)>((nil, false))

        init(port: Int, _ path: String, _ json: [String: Int]) {
            Thread { [self] in
                let status = try? Client(port: port).put(path, json).status
                answer.withLock { $0 = (status, true) }
            }.start()
        }

        var status: Int? { answer.withLock { $0.status } }
        var isFinished: Bool { answer.withLock { $0.isFinished } }
    }

    /// The PIDs of the processes whose parent is `parent` (from `/proc`).
    private static func children(of parent: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && pid_t(fields[1]) == parent ? pid : nil
        }
    }

    /// Waits up to 20 s for `condition`.
    func eventually(_ condition: () throws -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if try condition() { return true }
            usleep(10_000)
        }
        return false
    }
}

/// Writers and subscribers against a group of servers sharing one database, on collection `c` (one section).
/// Each writer owns its item ids (`w<writer>-<n>`): it inserts, updates and deletes them through random servers,
/// and remembers the outcome of every acknowledged mutation (a `503 storage_unavailable` changed nothing); an id
/// whose mutation got no clear answer (a killed server) is left alone from then on. Subscribers follow the feed into `ItemMirror`s: one per server,
/// and one that moves to the next server at every poll.
final class Workload: @unchecked Sendable {
    // @unchecked: the mutable state is in Mutexes and Atomics; `threads` is touched by the test's thread only.
    private let ports: Mutex<[Int]>
    private let expected = Mutex<[String: String?]>([:])
    private let uncertain = Atomic<Int>(0)
    private let unavailableAt = Mutex<[Date]>([])
    private let subscriberMirrors: Mutex<[ItemMirror]>
    private let failures = Mutex<[String]>([])
    private let target = Mutex<String?>(nil)
    private var writerThreads: [Thread] = []
    private var subscriberThreads: [Thread] = []

    init(servers: [ServerProcess]) throws {
        ports = Mutex(servers.map(\.port))
        let created = try servers[0].client.put("/v1/collections/c", ["sections": [["id": "s"]]])
        guard created.status == 201 else { throw ClientError.malformed("create: \(created.text)") }
        let start = ItemMirror(snapshot: ["version": created.object["version"] ?? "", "sections": [["items": []]]])
        // A server serves what it has applied: the others know `c` a few milliseconds later.
        let deadline = Date().addingTimeInterval(20)
        for server in servers {
            while try server.client.get("/v1/collections/c").status != 200 && Date() < deadline { usleep(5_000) }
        }
        subscriberMirrors = Mutex(Array(repeating: start, count: servers.count + 1))
    }

    var unacknowledged: Int { uncertain.load(ordering: .relaxed) }
    var unavailable: Int { unavailableAt.withLock { $0.count } }
    var unavailableTimes: [Date] { unavailableAt.withLock { $0 } }
    var mirrors: [ItemMirror] { subscriberMirrors.withLock { $0 } }

    func replace(server index: Int, port: Int) { ports.withLock { $0[index] = port } }

    /// Starts the writers (each `mutationsPerWriter` mutations, `pause` microseconds apart) and the subscribers.
    func start(writers: Int, mutationsPerWriter: Int, pause: UInt32 = 0) {
        for index in 0..<subscriberMirrors.withLock({ $0.count }) {
            let thread = Thread { [self] in subscribe(index, moving: index == ports.withLock { $0.count }) }
            subscriberThreads.append(thread)
            thread.start()
        }
        for writer in 0..<writers {
            let thread = Thread { [self] in write(writer, count: mutationsPerWriter, pause: pause) }
            writerThreads.append(thread)
            thread.start()
        }
    }

    func waitForWriters() {
        let deadline = Date().addingTimeInterval(120)
        while writerThreads.contains(where: { !$0.isFinished }) && Date() < deadline { usleep(10_000) }
    }

    /// Waits until every server serves the same version of `c` (and `expected`, if given), and returns it.
    func converge(to expected: ItemMirror? = nil) throws -> ItemMirror {
        let deadline = Date().addingTimeInterval(20)
        while true {
            let snapshots = try ports.withLock { $0 }.map {
                ItemMirror(snapshot: try Client(port: $0).get("/v1/collections/c").object)
            }
            if snapshots.allSatisfy({ $0 == (expected ?? snapshots[0]) }) { return snapshots[0] }
            guard Date() < deadline else {
                throw ClientError.malformed(
                    "servers did not converge: \(snapshots.map(\.version)), expected \(expected?.version ?? "any")")
            }
            usleep(20_000)
        }
    }

    /// Lets the subscribers reach `version`, stops them, and returns what went wrong for them.
    func stopSubscribers(at version: String) -> [String] {
        target.withLock { $0 = version }
        let deadline = Date().addingTimeInterval(20)
        while subscriberThreads.contains(where: { !$0.isFinished }) && Date() < deadline { usleep(10_000) }
        if subscriberThreads.contains(where: { !$0.isFinished }) {
            failures.withLock { $0.append("a subscriber did not reach \(version)") }
        }
        return failures.withLock { $0 }
    }

    /// Every acknowledged outcome is in `final`.
    func checkAcknowledged(in final: ItemMirror) {
        let data = Dictionary(final.items.map { ($0.id, $0.data) }) { first, _ in first }
        let outcomes = expected.withLock { $0 }
        #expect(!outcomes.isEmpty)
        for (id, value) in outcomes {
            #expect(data[id] == value, "\(id): acknowledged \(value ?? "deleted"), found \(data[id] ?? "nothing")")
        }
    }

    private func write(_ writer: Int, count: Int, pause: UInt32) {
        var generator = SystemRandomNumberGenerator()
        var live: [String] = []
        for step in 0..<count {
            if pause > 0 { usleep(pause) }
            let port = ports.withLock { $0.randomElement(using: &generator) ?? 0 }
            let client = Client(port: port)
            let choice = Int.random(in: 0..<10, using: &generator)
            let id: String
            let outcome: String?
            let response: HTTPResponse?
            if choice < 2, let victim = live.randomElement(using: &generator) {
                id = victim
                outcome = nil
                response = try? client.request("DELETE", "/v1/collections/c/items/\(id)")
            } else {
                id = choice < 5 ? live.randomElement(using: &generator) ?? "w\(writer)-\(step)" : "w\(writer)-\(step)"
                outcome = "\(step)"
                response = try? client.put("/v1/collections/c/items/\(id)", ["data": step])
            }
            guard let response, (200..<300).contains(response.status) else {
                // 503 storage_unavailable promises that nothing was applied: what was expected of the id stays.
                if response?.status == 503 && response?.errorCode == "storage_unavailable" {
                    unavailableAt.withLock { $0.append(Date()) }
                    continue
                }
                uncertain.add(1, ordering: .relaxed)
                live.removeAll { $0 == id }
                expected.withLock { $0[id] = nil }
                continue
            }
            expected.withLock { $0[id] = .some(outcome) }
            if outcome == nil { live.removeAll { $0 == id } } else if !live.contains(id) { live.append(id) }
        }
    }

    private func subscribe(_ index: Int, moving: Bool) {
        var turn = index
        let deadline = Date().addingTimeInterval(150)
        while Date() < deadline {
            let mirror = subscriberMirrors.withLock { $0[index] }
            if let version = target.withLock({ $0 }), mirror.version == version { return }
            let servers = ports.withLock { $0 }
            let port = servers[moving ? turn % servers.count : index]
            turn += 1
            guard
                let response = try? Client(port: port).get(
                    "/v1/collections/c/changes?since=\(mirror.version)&timeout=1")
            else {
                usleep(20_000)
                continue
            }
            switch response.status {
            case 200:
                var next = mirror
                if next.apply(poll: response.object) {
                    subscriberMirrors.withLock { $0[index] = next }
                } else {
                    failures.withLock { $0.append("subscriber \(index): cannot apply \(response.text.prefix(300))") }
                    return
                }
            case 503:
                usleep(20_000)
            default:
                failures.withLock {
                    $0.append("subscriber \(index) on port \(port): \(response.status) \(response.text)")
                }
                return
            }
        }
    }
}
