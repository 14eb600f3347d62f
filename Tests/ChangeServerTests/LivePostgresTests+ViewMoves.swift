import Foundation
import Model
import ProcessSupport
import Synchronization
import Testing

@testable import ChangeServer

/// A view that moves to another source has records under both names, and each source is snapshotted on its own:
/// a start must not lose what the move was made from, nor take the view from a stale snapshot of a source it left.
/// The server that commits a move snapshots the new source right behind it, and so does every server that reads
/// it; `changeserver_views` notes where each view is, and since which record; a view's records take ids in the
/// order they commit.
extension LivePostgresTests {
    /// A view moved off `zeta`, which is snapshotted afterwards (its snapshot covers the view's definition, and
    /// does not hold the view any more), is the same after a restart: the move snapshots `alpha` right behind it.
    /// (Without that, a start replayed the move onto no view, and defined it anew: another epoch, version 1.)
    @Test func aViewMovedOffASourceSnapshottedAfterwardsIsTheSameAfterARestart() throws {
        try checkViewsAgree(database: "movedoff", views: ["m"], snapshotBytes: 4096) { server, snapshotted throws in
            #expect(try server.client.put("/v1/views/m", ["source": "zeta"]).status == 201)
            #expect(try server.client.put("/v1/views/m", ["source": "alpha"]).status == 200)
            #expect(try snapshotted("alpha"), "alpha was snapshotted behind the move")
            try Self.fill("zeta", through: server)
            #expect(try snapshotted("zeta"), "zeta was snapshotted without the view")
        }
    }

    /// A server whose follower has not read another server's move of view `v` off `zeta` yet writes `zeta` past
    /// `--snapshot-bytes`, and its snapshot of `zeta` still holds `v`: a server started afterwards serves `v` as
    /// moved, not as that stale copy holds it (it restored the copy over the move, which came before it in id
    /// order, and the view went back to `zeta`).
    @Test func aStaleSnapshotOfAViewsOldSourceDoesNotUndoItsMove() throws {
        let (cluster, url, mover) = try staleSnapshotOfZeta(database: "stalesnapshot")
        defer { withExtendedLifetime(cluster) {} }
        try expectTheSameAfterARestart(url, as: mover)
    }

    /// After that stale snapshot, a later record of the view (a redefinition on the same source, or one refused
    /// for its `If-Match`) still leaves the stale copy out: a view is left out of other collections' snapshots that
    /// stand after the record that brought it to its source, not only after its latest record (found in review:
    /// the view went back to `zeta`, or ended a version ahead).
    @Test(arguments: ["redefined", "refused"]) func aLaterRecordOfAMovedViewStillLeavesTheStaleSnapshotOut(
        _ kind: String
    ) throws {
        let (cluster, url, mover) = try staleSnapshotOfZeta(database: "later\(kind)")
        defer { withExtendedLifetime(cluster) {} }
        if kind == "refused" {
            let refused = try mover.client.request(
                "PUT", "/v1/views/v", headers: ["If-Match": #""nope.7""#], body: Array(#"{"source":"alpha"}"#.utf8))
            #expect(refused.status == 412)
        } else {
            #expect(try mover.client.put("/v1/views/v", ["source": "alpha", "limit": 5]).status == 200)
        }
        try expectTheSameAfterARestart(url, as: mover)
    }

    /// A server that has not read another server's move of `v` to `alpha` redefines `v` on `zeta`: a move back, in
    /// the database's order. Its batch waits for the read of `alpha` (where the database notes the view), so that
    /// it applies the move first, as every server does, and `zeta` is snapshotted behind it: the view is the same
    /// on both servers, and on one started after `alpha` was snapshotted again without it (found in review: this
    /// server applied the older move over its own record, and `zeta` was not snapshotted).
    @Test func aViewRecordOfAServerThatHadNotReadTheViewsMoveWaitsForIt() throws {
        let (cluster, url, behind) = try Self.startWithViewOnZeta(database: "unreadmove", snapshotBytes: 4096)
        let backend = try followerBackend(cluster, database: "unreadmove")
        let mover = try ServerProcess(["--postgres", url, "--snapshot-bytes", "4096"])
        kill(backend, SIGSTOP)
        defer { kill(backend, SIGCONT) }
        #expect(try mover.client.put("/v1/views/v", ["source": "alpha"]).status == 200)
        // Watched on a connection of its own: the wait for the move's read lasts at most 2 s from the commit, and
        // a psql started for every look could take longer than that on a loaded machine.
        let watcher = try PGConnection(url)
        let redefined = redefineOnZeta(through: behind)
        // The redefinition is committed (its note names `zeta`) and waits for the read of the move.
        #expect(
            try eventually {
                try watcher.execute("SELECT source FROM changeserver_views WHERE name = 'v'").string(0, 0) == "zeta"
            }, "the redefinition never committed")
        kill(backend, SIGCONT)
        #expect(redefined() == 200)
        try expectRedefinedOnZeta(behind, mover)
        #expect(try snapshotted("zeta", cluster, "unreadmove"), "zeta was snapshotted behind the redefinition")
        try Self.fill("alpha", through: mover)
        let regrown = try eventually {
            try cluster.sql(
                "SELECT seq > 2 FROM changeserver_snapshots WHERE collection = 'alpha'", database: "unreadmove")
                == "t\n"
        }
        #expect(regrown, "alpha was snapshotted again, without the view")
        try expectTheSameAfterARestart(url, as: behind)
        #expect(!behind.log.contains("handed on without it"))
    }

    /// A server that reads another's move of a view from `zeta` to `alpha` snapshots `alpha` too, so that the move
    /// does not hang on the mover's own snapshot: here the database refuses every snapshot of the mover (a role of
    /// its own, a trigger), as if it had stopped before writing it. The server that read the move then snapshots
    /// `zeta` past `--snapshot-bytes`, without the view; a server started afterwards still has the view as it was.
    /// (Without the reader's snapshot, that start rebuilt the view from the move's record alone: another epoch,
    /// version 1, and every cursor of it `410`.) `together`: the reader, stopped meanwhile, reads the view's
    /// definition and its move at once (a review found the move missed so in 2 runs of 4, when it was told apart
    /// where records are read, from the views as applied so far, rather than where the move is applied).
    @Test(arguments: [false, true]) func aMoveIsSnapshottedByTheServersThatReadItToo(together: Bool) throws {
        let database = together ? "movereadtogether" : "movereadalone"
        let (cluster, url, reader) = try Self.startWithViewOnZeta(database: database, snapshotBytes: 4096)
        _ = try cluster.sql(
            """
            CREATE ROLE mover LOGIN SUPERUSER;
            CREATE FUNCTION refuse_mover() RETURNS trigger AS $$ BEGIN
                IF current_user = 'mover' THEN RAISE EXCEPTION 'the mover stopped'; END IF; RETURN NEW; END $$
                LANGUAGE plpgsql;
            CREATE TRIGGER refuse_mover BEFORE INSERT OR UPDATE ON changeserver_snapshots
                FOR EACH ROW EXECUTE FUNCTION refuse_mover();
            """, database: database)
        let mover = try ServerProcess(["--postgres", url.replacingOccurrences(of: "//postgres@", with: "//mover@")])
        if together { kill(reader.process.processIdentifier, SIGSTOP) }
        #expect(try mover.client.put("/v1/views/w", ["source": "zeta"]).status == 201)
        if !together { #expect(try eventually { try reader.client.get("/v1/views/w").status == 200 }) }
        #expect(try mover.client.put("/v1/views/w", ["source": "alpha"]).status == 200)
        if together { kill(reader.process.processIdentifier, SIGCONT) }
        #expect(try eventually { mover.log.contains("snapshot of alpha failed") }, "the mover's snapshot was refused")
        #expect(try snapshotted("alpha", cluster, database), "the reader snapshotted alpha behind the move")
        // Logged after the commit the row shows, and read from the server's stderr as it comes.
        let logged = try eventually { reader.log.contains("snapshot of alpha at record") }
        #expect(logged, "\(reader.log.suffix(2000))")
        let moved = try eventually { try reader.client.get("/v1/views/w").text.contains(#""source":"alpha""#) }
        #expect(moved, "the reader read the move")
        try Self.fill("zeta", through: reader)
        let regrown = try eventually {
            try cluster.sql(
                "SELECT seq > 2 FROM changeserver_snapshots WHERE collection = 'zeta'", database: database) == "t\n"
        }
        #expect(regrown, "zeta was snapshotted again, without the view")
        kill(mover.process.processIdentifier, SIGKILL)
        try expectTheSameAfterARestart(url, as: reader, view: "w")
    }

    /// The snapshot a move owes its new source is tried again a second after it failed, with no other write to
    /// bring it about (it waited for this server's next batch; the insert fails once here, by a trigger).
    @Test func aFailedSnapshotOfAMovesNewSourceIsTriedAgainWhileIdle() throws {
        let (cluster, _, server) = try Self.startWithViewOnZeta(database: "owed")
        _ = try cluster.sql(
            """
            CREATE SEQUENCE fail_once;
            CREATE FUNCTION fail_once() RETURNS trigger AS $$ BEGIN
                IF NEW.collection = 'alpha' AND nextval('fail_once') = 1 THEN RAISE EXCEPTION 'fails once'; END IF;
                RETURN NEW; END $$ LANGUAGE plpgsql;
            CREATE TRIGGER fail_once BEFORE INSERT ON changeserver_snapshots
                FOR EACH ROW EXECUTE FUNCTION fail_once();
            """, database: "owed")
        #expect(try server.client.put("/v1/views/v", ["source": "alpha"]).status == 200)
        #expect(try eventually { server.log.contains("snapshot of alpha failed") })
        #expect(try snapshotted("alpha", cluster, "owed"), "tried again while idle")
    }

    /// Owed snapshots that keep failing (three deleted collections, the database refusing their snapshots) are tried
    /// again with a wait that doubles with the failures in a row (1 s, 2, 4, … up to a minute), not more and more
    /// often: every snapshot that ended set a timer of its own, and each timer tried all of them (found in review:
    /// 1,127 failures in 40 s, and rising). Each is tried again: none waits for a write.
    @Test func owedSnapshotsThatKeepFailingAreTriedAgainLessAndLessOften() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("storm")
        let server = try ServerProcess(["--postgres", url])
        for name in ["d1", "d2", "d3"] {
            #expect(try server.client.put("/v1/collections/\(name)", ["sections": [["id": "s"]]]).status == 201)
        }
        _ = try cluster.sql(
            """
            CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$ LANGUAGE plpgsql;
            CREATE TRIGGER refuse BEFORE INSERT ON changeserver_snapshots FOR EACH ROW EXECUTE FUNCTION refuse();
            """, database: "storm")
        for name in ["d1", "d2", "d3"] {
            #expect(try server.client.request("DELETE", "/v1/collections/\(name)").status == 204)
        }
        let failures = { server.logCount(of: "failed (") }
        #expect(try eventually { failures() >= 3 })
        let first = failures()
        usleep(8_000_000)
        let later = failures() - first
        // Waits of 1, 2 and 4 s for the first three, then 8, 16 and 32 s: about three tries in 8 s.
        #expect(later >= 2 && later <= 9, "\(later) failures in 8 s")
        #expect(server.log.contains("it will be tried again in 4 s"), "\(server.log.suffix(2000))")
    }

    /// A server's start alters nothing when the schema has every column: an `ALTER TABLE` on every start queued
    /// for the exclusive lock of `changeserver_views` behind another server's start (which reads it in its long
    /// transaction), and every view record of the running servers queued behind that (found in review: a view's
    /// `PUT` waited 10 s).
    @Test func aStartTakesNoExclusiveLockOnAnUpToDateSchema() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("nolock")
        try PostgresSchema.prepare(PGConnection(url))
        let reader = try PGConnection(url)
        try reader.execute("BEGIN")
        try reader.execute(PostgresSchema.viewSources)
        let starting = try PGConnection(url)
        try starting.execute("SET lock_timeout = '2s'")
        #expect(throws: Never.self) { try PostgresSchema.prepare(starting) }
        try reader.execute("COMMIT")
    }

    /// The records of one view take ids in the order their transactions commit, whichever collections they go to:
    /// the journal takes its views' rows before its records take ids (`PostgresSchema.lockView`). Its record of `v`
    /// under `alpha`, sent while another transaction holds `v`'s row and then writes a record of `v` under `zeta`,
    /// takes the higher id. (A move under `alpha` that took the lower id, its note written after that of a record
    /// under `zeta` committed first, was dropped, and a start took the view for one on `zeta`; found in review.)
    @Test func theJournalTakesItsViewsRowsBeforeIds() throws {
        let cluster = try PostgresCluster()
        let (url, journal) = try startedJournal(on: cluster, database: "viewids")
        defer { journal.close() }
        func record(_ source: String) -> [UInt8] {
            RecordCodec.encode(
                .defineView(
                    view: "v", epoch: "e", definition: JSONData(canonical: #"{"source":"\#(source)"}"#),
                    conditions: .none))
        }
        let holder = try PGConnection(url)
        try holder.execute("BEGIN")
        try holder.execute(PostgresSchema.lockView, [.text("v")])
        let durable = Mutex<Bool?>(nil)
        try journal.append(record("alpha")) { done in durable.withLock { $0 = done } }
        let waiting = try eventually {
            try cluster.sql(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'", database: "viewids") == "1\n"
        }
        #expect(waiting, "the journal's transaction waits for the view's row")
        let seq = try holder.execute(
            PostgresSchema.append, [.text("zeta"), .int64(1), .byteArrays([record("zeta")])]
        ).int64(0, 0)
        try holder.execute(PostgresSchema.noteView, [.text("v"), .text("zeta"), .int64(seq), .int64(0)])
        try holder.execute("COMMIT")
        #expect(try eventually { durable.withLock { $0 } == true })
        let order = try cluster.sql("SELECT collection FROM changeserver_records ORDER BY id", database: "viewids")
        #expect(order == "zeta\nalpha\n", "the transaction that committed first took the lower id")
        let noted = try holder.execute(PostgresSchema.viewSources)
        #expect(noted.rows == 1 && noted.string(0, 1) == "alpha")
    }

    /// A server's record of `v` whose `COMMIT` got no answer (its backend ended while the commit waited for a
    /// standby that does not exist; the commit was made) waits, once found committed, for the read of the view's
    /// latest record, another server's move it had not read, as at a commit: the view is the same on both servers
    /// and after a restart (found in review: the found record was handed on at once, and the older move over it).
    @Test func aViewRecordWhoseCommitGotNoAnswerWaitsForTheViewsLatestRecord() throws {
        let (cluster, url, behind) = try Self.startWithViewOnZeta(database: "lostcommit")
        let backend = try followerBackend(cluster, database: "lostcommit")
        let mover = try ServerProcess(["--postgres", url])
        let admin = try PGConnection(url)
        try admin.execute("SET synchronous_commit = local")
        kill(backend, SIGSTOP)
        defer { kill(backend, SIGCONT) }
        #expect(try mover.client.put("/v1/views/v", ["source": "alpha"]).status == 200)
        // The mover's snapshot of alpha is stored first: its COMMIT would wait for the standby too.
        #expect(try snapshotted("alpha", cluster, "lostcommit"))
        try admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
        try admin.execute("SELECT pg_reload_conf()")
        defer {
            _ = try? admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
            _ = try? admin.execute("SELECT pg_reload_conf()")
        }
        // The writer's session reads the new setting only when its backend gets to the reload, which its commit
        // could come before: once new sessions have it, the writer's is ended, and it starts a new one.
        let reloaded = try eventually {
            try PGConnection(url).execute("SHOW synchronous_standby_names").string(0, 0) == "nobody"
        }
        #expect(reloaded)
        try admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'changeserver writer'")
        let redefined = redefineOnZeta(through: behind)
        var writer: Int64 = 0
        _ = try eventually {
            let found = try admin.execute(
                "SELECT pid::bigint FROM pg_stat_activity WHERE wait_event = 'SyncRep' "
                    + "AND application_name = 'changeserver writer'")
            if found.rows > 0 { writer = found.int64(0, 0) }
            return writer > 0
        }
        try #require(writer > 0, "the commit waits for the standby")
        try admin.execute("SELECT pg_terminate_backend(\(writer)::int)")
        try admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
        try admin.execute("SELECT pg_reload_conf()")
        #expect(try eventually { behind.log.contains("commit got no answer") })
        kill(backend, SIGCONT)
        #expect(redefined() == 200)
        try expectRedefinedOnZeta(behind, mover)
        try expectTheSameAfterARestart(url, as: behind)
        #expect(!behind.log.contains("handed on without it"))
    }

    /// `changeserver_views` notes a view's source after its latest record and since which record it is there,
    /// straight against the schema: a record that may be refused keeps them only where it is stored under the same
    /// collection, a note of an earlier record changes nothing, a row without `source_since` is taken for unknown
    /// (it was read as 0, and a start left the view out of every other collection's snapshot; found in review), and
    /// a server of an earlier version, which notes no source, leaves it unknown.
    @Test func aViewsSourceIsNotedOnlyWhereItIsKnown() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("sources")
        let connection = try PGConnection(url)
        try PostgresSchema.prepare(connection)
        var ids: [String: Int64] = [:]
        for (collection, count) in [("zeta", 2), ("alpha", 5)] {
            let records = Array(repeating: [UInt8](repeating: 1, count: 4), count: count)
            try connection.execute(
                PostgresSchema.append, [.text(collection), .int64(Int64(count)), .byteArrays(records)])
        }
        let rows = try connection.execute("SELECT collection, seq, id FROM changeserver_records")
        for row in 0..<rows.rows { ids["\(rows.string(row, 0))\(rows.int64(row, 1))"] = rows.int64(row, 2) }
        func note(_ collection: String, _ seq: Int64, _ note: RecordCodec.ViewNote) throws -> String? {
            try connection.execute(
                PostgresSchema.noteView, [.text("v"), .text(collection), .int64(seq), .int64(note.rawValue)])
            let sources = try connection.execute(PostgresSchema.viewSources)
            guard sources.rows == 1 else { return nil }
            let since = ids.first { $0.value == sources.int64(0, 2) }?.key ?? "?"
            return "\(sources.string(0, 1)) since \(since)"
        }
        #expect(try note("zeta", 1, .defines) == "zeta since zeta1")
        #expect(try note("alpha", 1, .mayBeRefused) == nil, "a move that may be refused")
        #expect(try note("alpha", 2, .defines) == "alpha since alpha2")
        #expect(try note("alpha", 3, .mayBeRefused) == "alpha since alpha2", "one that may be refused, same source")
        #expect(try note("alpha", 4, .defines) == "alpha since alpha2", "a redefinition on the same source")
        #expect(try note("zeta", 2, .defines) == "alpha since alpha2", "an earlier record (zeta's ids are lower)")
        try connection.execute("UPDATE changeserver_views SET source_since = NULL")
        #expect(try connection.execute(PostgresSchema.viewSources).rows == 0, "noted before source_since was")
        #expect(try note("alpha", 5, .defines) == "alpha since alpha5", "since a later record, never an earlier one")
        let earlierVersion = """
            INSERT INTO changeserver_views (name, last_id, deleted)
            SELECT 'v', id + 1, false FROM changeserver_records WHERE collection = 'alpha' AND seq = 5
            ON CONFLICT (name) DO UPDATE SET last_id = excluded.last_id, deleted = excluded.deleted
            WHERE changeserver_views.last_id < excluded.last_id
            """
        try connection.execute(earlierVersion)
        #expect(try connection.execute(PostgresSchema.viewSources).rows == 0, "noted by a server of an earlier version")
    }

    /// Two servers on one database with view `v` on `zeta`; the first one's follower stalled while the second
    /// (returned) moves `v` to `alpha`, and the first writes `zeta` past `--snapshot-bytes`: its snapshot of `zeta`
    /// holds `v` stale. Returns once both snapshots are stored and the first server has read the move (the cluster
    /// stops when it is let go).
    private func staleSnapshotOfZeta(database: String) throws -> (PostgresCluster, String, ServerProcess) {
        let (cluster, url, lagging) = try Self.startWithViewOnZeta(database: database, snapshotBytes: 4096)
        let backend = try followerBackend(cluster, database: database)
        let mover = try ServerProcess(["--postgres", url])
        kill(backend, SIGSTOP)
        defer { kill(backend, SIGCONT) }
        #expect(try mover.client.put("/v1/views/v", ["source": "alpha"]).status == 200)
        try Self.fill("zeta", through: lagging)
        #expect(try snapshotted("alpha", cluster, database), "alpha was snapshotted by the mover")
        #expect(try snapshotted("zeta", cluster, database), "zeta was snapshotted by the server behind")
        kill(backend, SIGCONT)
        let followed = try eventually {
            try lagging.client.get("/v1/views/v").text.contains(#""source":"alpha""#)
        }
        #expect(followed, "the lagging server read the move")
        #expect(try mover.client.get("/v1/views/v").text.contains(#""source":"alpha""#))
        return (cluster, url, mover)
    }

    /// Sends `PUT /v1/views/v {"source": "zeta", "limit": 5}` through `server` on a thread of its own; the closure
    /// returned waits for the answer's status.
    private func redefineOnZeta(through server: ServerProcess) -> () -> Int? {
        let port = server.port
        let status = Mutex<Int?>(nil)
        let thread = Thread {
            let response = try? Client(port: port).put("/v1/views/v", ["source": "zeta", "limit": 5])
            status.withLock { $0 = response?.status ?? 0 }
        }
        thread.start()
        return {
            while !thread.isFinished { usleep(10_000) }
            return status.withLock { $0 }
        }
    }

    /// `behind` shows view `v` as `redefineOnZeta` left it, and `mover` comes to show the same.
    private func expectRedefinedOnZeta(_ behind: ServerProcess, _ mover: ServerProcess) throws {
        let shown = try behind.client.get("/v1/views/v").text
        #expect(shown.contains(#""limit":5"#), "\(shown)")
        let agreed = try eventually { try mover.client.get("/v1/views/v").text == shown }
        #expect(agreed, "the view on the server that moved it: \((try? mover.client.get("/v1/views/v").text) ?? "")")
    }

    /// Whether a snapshot of `collection` is stored (within `eventually`'s wait).
    private func snapshotted(_ collection: String, _ cluster: PostgresCluster, _ database: String) throws -> Bool {
        try eventually {
            try cluster.sql(
                "SELECT count(*) FROM changeserver_snapshots WHERE collection = '\(collection)' AND content IS NOT NULL",
                database: database) == "1\n"
        }
    }

    /// `view` on a server started now reads as on `server`.
    private func expectTheSameAfterARestart(_ url: String, as server: ServerProcess, view: String = "v") throws {
        let expected = try server.client.get("/v1/views/\(view)").text
        let fresh = try ServerProcess(["--postgres", url])
        let restarted = try fresh.client.get("/v1/views/\(view)")
        let shown = "\(restarted.object["definition"] ?? "") at \(restarted.object["version"] ?? "")"
        #expect(restarted.text == expected, "the view on a server started afterwards: \(shown)")
    }
}
