import Foundation
import ProcessSupport
import Testing

/// What a server says when PostgreSQL refuses it: its commits (the database's disk full), or its connections.
extension LivePostgresTests {
    /// Lines of the server's log holding `text`.
    private func lines(_ server: ServerProcess, _ text: String) -> [Substring] {
        server.log.split(separator: "\n").filter { $0.contains(text) }
    }

    /// A database that refuses the writer's transactions on a working connection (here a trigger raises the error
    /// a full disk gives) takes the store down until one commits: writes got `503` while `/healthz` and
    /// `changeserver_store_up` said the store was up, and each refused batch logged a line of its own. With no write
    /// coming, the idle writer's trial finds the database taking writes again.
    @Test func aDatabaseThatRefusesCommitsTakesTheStoreDownUntilOneCommits() throws {
        let cluster = try PostgresCluster()
        let server = try ServerProcess(["--postgres", try cluster.createDatabase("refusing")])
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        try cluster.sql(
            """
            CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'could not extend file: No space left on device'; END $$;
            CREATE TRIGGER refuse BEFORE INSERT ON changeserver_records FOR EACH ROW EXECUTE FUNCTION refuse();
            """, database: "refusing")
        for step in 0..<3 {
            let refused = try server.client.put("/v1/collections/c/items/i\(step)", ["data": step])
            #expect(refused.status == 503 && refused.errorCode == "storage_unavailable", "\(refused.text)")
        }
        let metrics = try server.client.get("/metrics").text
        #expect(metrics.contains("changeserver_store_up 0\n"))
        #expect(metrics.contains("changeserver_store_commit_failures_total 3\n"))
        #expect(try server.client.get("/healthz").text.contains(#""state":"down""#))
        let logged = lines(server, "No space left on device")
        #expect(logged.count == 1 && logged.allSatisfy { $0.contains(" error ") }, "\(logged)")
        try cluster.sql("DROP TRIGGER refuse ON changeserver_records", database: "refusing")
        #expect(try eventually { try server.client.get("/metrics").text.contains("changeserver_store_up 1\n") })
        #expect(try server.client.get("/healthz").text.contains(#""state":"up""#))
        #expect(try eventually { server.log.contains("PostgreSQL takes writes again: mutations are accepted") })
        #expect(
            try cluster.sql("SELECT count(*) FROM changeserver_records WHERE seq < 0", database: "refusing") == "0\n")
        #expect(try server.client.put("/v1/collections/c/items/a", ["data": 1]).status == 201)
        let items = try server.client.get("/v1/collections/c").object["sections"] as? [[String: Any]]
        #expect((items?.first?["items"] as? [Any])?.count == 1, "the refused writes changed nothing")
    }

    /// A server whose connections the database refuses says why, once per reason: it logged only that PostgreSQL
    /// was "unreachable", with libpq's reason (a changed password, no connection slot left) at `debug`.
    @Test func aServerTheDatabaseRefusesSaysWhyOnce() throws {
        let cluster = try PostgresCluster()
        let server = try ServerProcess(
            ["--postgres", try cluster.createDatabase("closed"), "--log-level", "debug"])
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        try cluster.sql(#"ALTER DATABASE "closed" ALLOW_CONNECTIONS false"#)
        try cluster.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'closed'")
        let reason = "is not currently accepting connections"
        // Tried again and again (each try at debug), and said once.
        #expect(try eventually { lines(server, "; next try in ").count >= 2 }, "\(server.log.suffix(2000))")
        let said = lines(server, reason).filter { $0.contains(" error cannot connect to PostgreSQL (") }
        #expect(said.count == 1, "\(said)")
        #expect(lines(server, reason).contains { $0.contains(" warning the PostgreSQL follower cannot connect (") })
        #expect(try server.client.get("/metrics").text.contains("changeserver_store_up 0\n"))
        try cluster.sql(#"ALTER DATABASE "closed" ALLOW_CONNECTIONS true"#)
        #expect(try eventually { try server.client.get("/metrics").text.contains("changeserver_store_up 1\n") })
        #expect(try server.client.put("/v1/collections/c/items/a", ["data": 1]).status == 201)
    }
}
