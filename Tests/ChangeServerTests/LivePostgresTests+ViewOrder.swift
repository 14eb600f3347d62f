import Foundation
import Model
import ProcessSupport
import Synchronization
import Testing

@testable import ChangeServer

/// A view's records are stored under its source collection's name, and a view that changes source has records
/// under several names: every server, and every server started later, must apply them in the order they were
/// committed, not in the order of the names (recovery once replayed them by name, and a follower in the order of a
/// `Set`).
extension LivePostgresTests {
    /// A view redefined from source `zeta` to source `alpha` (sequential requests to one server) reads `alpha`, at
    /// the same version, on a server started afterwards and on one that was running (it read `zeta`, another epoch).
    @Test func aViewMovedToAnotherSourceIsTheSameAfterARestart() throws {
        try checkViewsAgree(database: "moved", views: ["v1"]) { server, _ throws in
            #expect(try server.client.put("/v1/views/v1", ["source": "zeta"]).status == 201)
            #expect(try server.client.put("/v1/views/v1", ["source": "alpha"]).status == 200)
        }
    }

    /// Another server defines view `v1` on `zeta` and then moves it to `alpha`, and only the second record's
    /// notification reaches this server (the first's is still on its way, as after a freeze): the follower, which
    /// reads the collections a notification names, must not apply the move first. (It did: the view ended on
    /// `zeta` under the move's epoch; the records here are written with SQL as another server writes them.)
    @Test func aViewMoveNotifiedBeforeItsDefinitionIsAppliedAfterIt() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("partial")
        let server = try ServerProcess(["--postgres", url])
        try Self.createSources(through: server)
        func appended(_ collection: String, _ source: String, epoch: String) -> String {
            let record = RecordCodec.encode(
                .defineView(
                    view: "v1", epoch: epoch, definition: JSONData(canonical: #"{"source":"\#(source)"}"#),
                    conditions: .none))
            let hex = record.map { String(format: "%02x", $0) }.joined()
            return """
                BEGIN; UPDATE changeserver_collections SET last_seq = 2 WHERE name = '\(collection)';
                INSERT INTO changeserver_records (collection, seq, record) VALUES ('\(collection)', 2, '\\x\(hex)');
                COMMIT;
                """
        }
        // One psql run: the two commits and the notification a few microseconds apart, so that the follower's
        // catch-up (every second) almost never reads the first record before the notification arrives.
        _ = try cluster.sql(
            appended("zeta", "zeta", epoch: "defined") + appended("alpha", "alpha", epoch: "moved")
                + "NOTIFY \(PostgresSchema.channel), 'another alpha:2';",
            database: "partial")
        var shown: [String: Any] = [:]
        let moved = try eventually {
            shown = try server.client.get("/v1/views/v1").object
            return (shown["version"] as? String)?.hasSuffix(".2") == true
        }
        #expect(moved, "\(shown)")
        #expect((shown["definition"] as? [String: Any])?["source"] as? String == "alpha", "\(shown)")
        #expect(shown["version"] as? String == "defined.2", "\(shown)")
    }

    /// Another server writes to `zeta`, the source of view `v`, and its notification is not in hand yet when this
    /// server moves `v` to `alpha`: the move must take effect after that write, as it does on a server started
    /// afterwards (the write took a lower id). It did not: a server applied its own view record at its commit, so
    /// the write to `zeta` came after the move here and missed the view, which stayed a version behind for good.
    /// (The write is made with SQL, as another server makes it, without its `NOTIFY`; the follower's catch-up runs
    /// once a second, so it almost never reads the write before the move.)
    @Test func aViewMovedByThisServerAfterAnotherServersWriteToItsSourceFollowsThatWrite() throws {
        let (cluster, url, server) = try Self.startWithViewOnZeta(database: "ownmove")
        defer { withExtendedLifetime(cluster) {} }
        let another = try PGConnection(url)
        let record = RecordCodec.encode(
            .upsert(
                collection: "zeta", id: "late", data: JSONData(canonical: "1"), section: nil, index: nil,
                conditions: .none))
        try another.execute("BEGIN")
        try another.execute(PostgresSchema.append, [.text("zeta"), .int64(1), .byteArrays([record])])
        try another.execute("COMMIT")
        #expect(try server.client.put("/v1/views/v", ["source": "alpha"]).status == 200)
        let moved = try server.client.get("/v1/views/v").text
        let fresh = try ServerProcess(["--postgres", url])
        #expect(try fresh.client.get("/v1/views/v").text == moved, "the view on a server started afterwards")
        #expect(try server.client.get("/v1/collections/zeta/items/late").status == 200)
    }

    /// A view's move waits for the follower to read the source it leaves, but not for good: with the follower's
    /// database backend stalled (`SIGSTOP`, its connection still up) while the writer's works, the move is
    /// answered after `PostgresJournal.movePatience` (2 s), not never. A write to the old source committed while
    /// the move waits takes effect after it, as on a server started afterwards (it did not touch the view there,
    /// and did here when it was handed on first); a write to another collection does not wait.
    @Test func aViewMoveIsAnsweredWhileTheFollowerCannotRead() throws {
        let (cluster, url, server) = try Self.startWithViewOnZeta(database: "stalled")
        let backend = try followerBackend(cluster, database: "stalled")
        kill(backend, SIGSTOP)
        defer { kill(backend, SIGCONT) }
        // Its next catch-up, within a second, is sent and never answered.
        usleep(1_500_000)
        let started = Date()
        let port = server.port
        let reached = try Self.commitsAndBodiesHeld(server)
        // The write to `zeta` keeps its status (-1: never sent, its wait failed), the time of its answer, and how many
        // batches the server had handed on unread by then: the move is handed on by its 2 s timer alone (the
        // follower is stopped), which counts it first, so a write answered before any count waited for nothing.
        let unread: @Sendable () -> Int = { (try? server.metric("changeserver_store_moves_unread_total")) ?? -1 }
        let written = Mutex<(status: Int, at: Date, unread: Int)?>(nil)
        let writer = Thread {
            guard reached(1, 18) else { return written.withLock { $0 = (-1, Date(), -1) } }
            let response = try? Client(port: port).put("/v1/collections/zeta/items/after", ["data": 1])
            written.withLock { $0 = (response?.status ?? 0, Date(), unread()) }
        }
        // A write elsewhere, in a group commit of its own, does not wait for the move. Its body's wait is left out:
        // the 28 bytes are held only until the move's 2 s run out.
        let elsewhere = Mutex<Int?>(nil)
        let other = Thread {
            guard reached(2, nil) else { return elsewhere.withLock { $0 = -1 } }
            let response = try? Client(port: port).put("/v1/collections/other", ["sections": [["id": "s"]]])
            elsewhere.withLock { $0 = response?.status ?? 0 }
        }
        writer.start()
        other.start()
        #expect(try server.client.put("/v1/views/v", ["source": "alpha"]).status == 200)
        let moved = Date()
        let waited = moved.timeIntervalSince(started)
        #expect(waited > 1.5 && waited < 10, "answered after \(waited) s")
        kill(backend, SIGCONT)
        while !writer.isFinished || !other.isFinished { usleep(10_000) }
        #expect(elsewhere.withLock { $0 } == 201)
        // Answered before the move's timer ran out, by the server's own clock: its request line (timed when the
        // answer goes) comes before the timer's warning; one that waited is answered after it.
        let stamp = { (text: String) in
            server.log.split(separator: "\n").first { $0.contains(text) }.map { String($0.prefix(24)) }
        }
        #expect(waitUntil(timeout: 10) { stamp("PUT /v1/collections/other 201") != nil })
        let answeredAt = stamp("PUT /v1/collections/other 201") ?? "~"
        let handedOnAt = stamp("handed on without it") ?? ""
        #expect(answeredAt < handedOnAt, "a write elsewhere waited for the move: \(answeredAt), \(handedOnAt)")
        #expect(written.withLock { $0?.status } == 201)
        #expect(written.withLock { $0?.unread } ?? 0 >= 1, "the write waited behind the move")
        let writeWaited = written.withLock { $0.map { $0.at.timeIntervalSince(started) } } ?? 0
        #expect(writeWaited > 1.5, "the write waited behind the move: answered after \(writeWaited) s")
        let shown = try server.client.get("/v1/views/v")
        #expect((shown.object["definition"] as? [String: Any])?["source"] as? String == "alpha", "\(shown.text)")
        #expect(server.log.contains("handed on without it"))
        let fresh = try ServerProcess(["--postgres", url])
        #expect(try fresh.client.get("/v1/views/v").text == shown.text, "the view on a server started afterwards")
    }

    /// While a move waits for the follower's read of `zeta` (its backend stalled until the write is committed), a
    /// write to `zeta` committed after the move, which that read meets, is still handed on after the move: the
    /// follower once handed this server's own rows on as it read them, ahead of the move waiting in the queue, and
    /// the view took the write here and not on a server started afterwards (found in review with this probe).
    @Test func aWriteReadByTheFollowerWaitsBehindAMoveOfThisServer() throws {
        let (cluster, url, server) = try Self.startWithViewOnZeta(database: "readwrite")
        let backend = try followerBackend(cluster, database: "readwrite")
        let port = server.port
        let statuses = Mutex<[String: Int]>([:])
        kill(backend, SIGSTOP)
        defer { kill(backend, SIGCONT) }
        let reached = try Self.commitsAndBodiesHeld(server)
        let move = Thread {
            let response = try? Client(port: port).put("/v1/views/v", ["source": "alpha"])
            statuses.withLock { $0["move"] = response?.status ?? 0 }
        }
        let write = Thread {
            guard reached(1, 18) else { return statuses.withLock { $0["write"] = -1 } }
            let response = try? Client(port: port).put("/v1/collections/zeta/items/after", ["data": 1])
            statuses.withLock { $0["write"] = response?.status ?? 0 }
        }
        move.start()
        write.start()
        #expect(reached(2, 28), "the move and the write committed, their answers waiting")
        kill(backend, SIGCONT)
        while !move.isFinished || !write.isFinished { usleep(10_000) }
        #expect(statuses.withLock { $0 } == ["move": 200, "write": 201])
        let shown = try server.client.get("/v1/views/v").text
        let fresh = try ServerProcess(["--postgres", url])
        #expect(try fresh.client.get("/v1/views/v").text == shown, "the view on a server started afterwards")
    }

    /// A wait (up to 20 s) for `server` to have made `commits` more group commits than now, with `bytes` of bodies
    /// held when not nil (a request's body is held until it is answered): the order in which these tests' requests
    /// meet the database, which fixed sleeps left to a loaded machine. Their bodies: `{"source":"alpha"}` is 18
    /// bytes, `{"data":1}` 10.
    static func commitsAndBodiesHeld(_ server: ServerProcess) throws
        -> @Sendable (_ commits: Int, _ bytes: Int?) -> Bool
    {
        let before = try #require(try server.metric("changeserver_store_commit_seconds_count"))
        return { commits, bytes in
            waitUntil(timeout: 20) {
                (try? server.metric("changeserver_store_commit_seconds_count")) ?? 0 >= before + commits
                    && (bytes == nil || (try? server.metric("changeserver_body_bytes_in_flight")) == bytes)
            }
        }
    }

    /// The PID of the server's follower's backend (named so in `pg_stat_activity`).
    func followerBackend(_ cluster: PostgresCluster, database: String) throws -> pid_t {
        let query = "SELECT pid FROM pg_stat_activity WHERE application_name = 'changeserver follower'"
        var backend: pid_t = 0
        _ = try eventually {
            backend =
                pid_t(try cluster.sql(query, database: database).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            return backend > 0
        }
        try #require(backend > 0, "the follower's backend")
        return backend
    }

    /// A view defined on `zeta`, deleted, then defined again on `alpha` exists on a server started afterwards (it
    /// was `404`: the deletion, stored under `zeta`, was replayed after the definition stored under `alpha`).
    @Test func aViewDeletedAndDefinedOnAnotherSourceExistsAfterARestart() throws {
        try checkViewsAgree(database: "redefined", views: ["dv"]) { server, _ throws in
            #expect(try server.client.put("/v1/views/dv", ["source": "zeta"]).status == 201)
            #expect(try server.client.request("DELETE", "/v1/views/dv").status == 204)
            #expect(try server.client.put("/v1/views/dv", ["source": "alpha"]).status == 201)
        }
    }

    /// With `--snapshot-bytes 4096`, a view's first source is snapshotted with the view, then the view moves to
    /// another source, which is snapshotted with it too: a server started afterwards serves the view of the second
    /// source only, at the same version (it restored both snapshots' copies of the view, in no particular order,
    /// and showed items of both sources).
    @Test func aViewMovedAfterItsSourceWasSnapshottedIsTheSameAfterARestart() throws {
        try checkViewsAgree(database: "snapmoved", views: ["m"], snapshotBytes: 4096) { server, snapshotted throws in
            #expect(try server.client.put("/v1/views/m", ["source": "zeta"]).status == 201)
            try Self.fill("zeta", through: server)
            #expect(try snapshotted("zeta"), "zeta was snapshotted with the view")
            #expect(try server.client.put("/v1/views/m", ["source": "alpha"]).status == 200)
            try Self.fill("alpha", through: server)
            #expect(try snapshotted("alpha"), "alpha was snapshotted with the view")
        }
    }

    /// A view moved from a snapshotted source to another, then deleted there, the other source snapshotted too, is
    /// gone after a restart as it is on the server (the first source's snapshot still holds it).
    @Test func aViewMovedThenDeletedIsGoneAfterARestart() throws {
        try checkViewsAgree(database: "snapdeleted", views: ["m"], snapshotBytes: 4096) { server, snapshotted throws in
            #expect(try server.client.put("/v1/views/m", ["source": "zeta"]).status == 201)
            try Self.fill("zeta", through: server)
            #expect(try snapshotted("zeta"), "zeta was snapshotted with the view")
            #expect(try server.client.put("/v1/views/m", ["source": "alpha"]).status == 200)
            #expect(try server.client.request("DELETE", "/v1/views/m").status == 204)
            try Self.fill("alpha", through: server)
            #expect(try snapshotted("alpha"), "alpha was snapshotted without the view")
        }
    }

    /// A deletion refused for its `If-Match` leaves the view, also for a server started afterwards (the deletion
    /// was noted as one in `changeserver_views` when it was committed, before it was refused, and a start dropped
    /// the view).
    @Test func aRefusedConditionalDeletionLeavesTheViewAfterARestart() throws {
        try checkViewsAgree(database: "refuseddelete", views: ["v"]) { server, _ throws in
            #expect(try server.client.put("/v1/views/v", ["source": "zeta"]).status == 201)
            let refused = try server.client.request("DELETE", "/v1/views/v", headers: ["If-Match": #""nope.7""#])
            #expect(refused.status == 412)
            #expect(try server.client.get("/v1/views/v").status == 200)
        }
    }

    /// A view moved off its snapshotted source and deleted, then a definition refused for its `If-Match`: gone
    /// after a restart too (the refused record's note cleared the deletion, and the old source's snapshot brought
    /// the view back).
    @Test func aRefusedDefinitionAfterADeletionLeavesTheViewGoneAfterARestart() throws {
        try checkViewsAgree(database: "refuseddefine", views: ["m"], snapshotBytes: 4096) {
            server, snapshotted throws in
            #expect(try server.client.put("/v1/views/m", ["source": "zeta"]).status == 201)
            try Self.fill("zeta", through: server)
            #expect(try snapshotted("zeta"), "zeta was snapshotted with the view")
            #expect(try server.client.put("/v1/views/m", ["source": "alpha"]).status == 200)
            #expect(try server.client.request("DELETE", "/v1/views/m").status == 204)
            let refused = try server.client.request(
                "PUT", "/v1/views/m", headers: ["If-Match": "*"], body: Array(#"{"source": "alpha"}"#.utf8))
            #expect(refused.status == 412)
            try Self.fill("alpha", through: server)
            #expect(try snapshotted("alpha"), "alpha was snapshotted without the view")
            #expect(try server.client.get("/v1/views/m").status == 404)
        }
    }

    /// A database written before records had ids (the columns dropped here, the schema's version 1) gets them in
    /// place at the next start, which serves what the last server served and says that the schema went to version 2
    /// (servers of version 1 refuse it from then on); records written afterwards go on from there.
    @Test func aDatabaseWrittenBeforeRecordIDsGetsThemInPlace() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("noids")
        let first = try ServerProcess(["--postgres", url, "--snapshot-bytes", "4096"])
        for name in ["b", "a"] {
            #expect(try first.client.put("/v1/collections/\(name)", ["sections": [["id": "s"]]]).status == 201)
            // `b`'s snapshot holds the view, which then moves to `a`: the ids must keep that snapshot before `a`'s
            // records, as a start before ids restored every snapshot first.
            if name == "b" { #expect(try first.client.put("/v1/views/v", ["source": "b", "limit": 3]).status == 201) }
            for step in 0..<40 {
                let data = String(repeating: "y", count: 100)
                #expect(try first.client.put("/v1/collections/\(name)/items/i\(step)", ["data": data]).status == 201)
            }
        }
        #expect(try first.client.put("/v1/views/v", ["source": "a", "limit": 3]).status == 200)
        for step in 0..<3 {
            #expect(try first.client.put("/v1/collections/a/items/n\(step)", ["data": 1]).status == 201)
        }
        let expected = try ["/v1/collections/a", "/v1/collections/b", "/v1/views/v"].map {
            ($0, try first.client.get($0).text)
        }
        #expect(first.stop() == 0)
        // Servers before ids noted no views, and did not snapshot a view's new source behind its move (`a` has all
        // its records still: fewer than the 1,000 a snapshot keeps).
        try cluster.sql(
            "DROP INDEX changeserver_records_id; ALTER TABLE changeserver_records DROP COLUMN id; "
                + "ALTER TABLE changeserver_snapshots DROP COLUMN last_id; DELETE FROM changeserver_views; "
                + "DELETE FROM changeserver_snapshots WHERE collection = 'a'; "
                + "UPDATE changeserver_schema SET version = 1", database: "noids")
        let next = try ServerProcess(["--postgres", url])
        #expect(next.log.contains("the database's schema went from version 1 to 2"), "\(next.log)")
        for (path, text) in expected { #expect(try next.client.get(path).text == text, "\(path)") }
        let ids = try cluster.sql(
            "SELECT count(*) = count(DISTINCT id) AND min(id) = 1 FROM changeserver_records", database: "noids")
        #expect(ids == "t\n", "every record has an id of its own")
        #expect(try next.client.put("/v1/collections/a/items/new", ["data": 1]).status == 201)
        let restarted = try ServerProcess(["--postgres", url])
        #expect(!restarted.log.contains("schema went"))
        for path in ["/v1/collections/a", "/v1/views/v"] {
            #expect(try restarted.client.get(path).text == next.client.get(path).text, "\(path)")
        }
    }

    /// A view that fed a collection deleted by a server stopped before it snapshotted it, then moved to another
    /// source, is the same after two more starts: the first one snapshots the deleted collection with the view as it
    /// was at the deletion (it stored the views fed at the end of its replay, without this one, which the next start
    /// then lacked before its move).
    @Test func aViewThatMovedOffADeletedCollectionIsTheSameAfterItsLateSnapshot() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("latedeleted")
        let first = try ServerProcess(["--postgres", url, "--purge-delay-seconds", "3600"])
        for name in ["gone", "other"] {
            let body: [String: Any] = ["sections": [["id": "s", "items": [["id": name, "data": name]]]]]
            #expect(try first.client.put("/v1/collections/\(name)", body).status == 201)
        }
        #expect(try first.client.put("/v1/views/v", ["source": "gone"]).status == 201)
        #expect(try first.client.request("DELETE", "/v1/collections/gone").status == 204)
        #expect(try first.client.put("/v1/views/v", ["source": "other"]).status == 200)
        let expected = try first.client.get("/v1/views/v").text
        #expect(first.stop() == 0)
        try cluster.sql("DELETE FROM changeserver_snapshots WHERE collection = 'gone'", database: "latedeleted")
        let next = try ServerProcess(["--postgres", url, "--purge-delay-seconds", "3600"])
        #expect(try next.client.get("/v1/views/v").text == expected)
        let stored = try eventually {
            try cluster.sql(
                "SELECT count(*) FROM changeserver_snapshots WHERE collection = 'gone'", database: "latedeleted")
                == "1\n"
        }
        #expect(stored, "the deleted collection was snapshotted at the start")
        #expect(next.stop() == 0)
        let restarted = try ServerProcess(["--postgres", url])
        #expect(try restarted.client.get("/v1/views/v").text == expected)
    }

    /// A cluster, a database `database` on it and a server on that (with `--snapshot-bytes` when given), with the two
    /// sources and view `v` on `zeta`.
    static func startWithViewOnZeta(database: String, snapshotBytes: Int? = nil) throws -> (
        PostgresCluster, String, ServerProcess
    ) {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase(database)
        let options = snapshotBytes.map { ["--snapshot-bytes", "\($0)"] } ?? []
        let server = try ServerProcess(["--postgres", url] + options)
        try createSources(through: server)
        #expect(try server.client.put("/v1/views/v", ["source": "zeta"]).status == 201)
        return (cluster, url, server)
    }

    /// Creates the two collections the views here move between, `zeta` and `alpha`, one item each.
    static func createSources(through server: ServerProcess) throws {
        for name in ["zeta", "alpha"] {
            let body: [String: Any] = ["sections": [["id": "s", "items": [["id": name, "data": name]]]]]
            #expect(try server.client.put("/v1/collections/\(name)", body).status == 201)
        }
    }

    /// Writes 6 items of about 1,000 bytes to `collection`: more than `--snapshot-bytes 4096`, so it is snapshotted.
    /// (Few writes: a server that has not read a move away from `collection` holds each of them up to 2 s.)
    static func fill(_ collection: String, through server: ServerProcess) throws {
        let filler = String(repeating: "x", count: 1000)
        for step in 0..<6 {
            let path = "/v1/collections/\(collection)/items/i\(step)"
            #expect(try server.client.put(path, ["data": filler]).status == 201)
        }
    }

    /// Creates collections `zeta` and `alpha` (one item each) through a server, runs `steps` on it (with a wait for
    /// a collection's snapshot row) while another server is stopped (SIGSTOP, so that it reads all their records
    /// at once when it goes on), then checks that each of `views` reads the same (definition, version, content,
    /// or `404`) on that server, on the other one, and on one started afterwards.
    func checkViewsAgree(
        database: String, views: [String], snapshotBytes: Int? = nil,
        _ steps: (ServerProcess, _ snapshotted: (String) throws -> Bool) throws -> Void
    ) throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase(database)
        let options = snapshotBytes.map { ["--snapshot-bytes", "\($0)"] } ?? []
        let server = try ServerProcess(["--postgres", url] + options)
        let follower = try ServerProcess(["--postgres", url])
        try Self.createSources(through: server)
        kill(follower.process.processIdentifier, SIGSTOP)
        defer { kill(follower.process.processIdentifier, SIGCONT) }
        try steps(server) { name in
            try eventually {
                try cluster.sql(
                    "SELECT count(*) FROM changeserver_snapshots WHERE content IS NOT NULL AND collection = '\(name)'",
                    database: database) == "1\n"
            }
        }
        kill(follower.process.processIdentifier, SIGCONT)
        let expected = try views.map { try server.client.get("/v1/views/\($0)").text }
        let fresh = try ServerProcess(["--postgres", url])
        for (view, text) in zip(views, expected) {
            #expect(try fresh.client.get("/v1/views/\(view)").text == text, "\(view) after a restart")
            let followed = try eventually { try follower.client.get("/v1/views/\(view)").text == text }
            let seen = try follower.client.get("/v1/views/\(view)").text
            #expect(followed, "\(view) on a running server: \(seen)")
        }
    }
}
