import Foundation
import ProcessSupport
import Testing

@testable import ChangeServer

/// A client behind a load balancer without affinity creates a collection through one server and writes to it
/// through another right away: every such write is answered as one server would answer it. Each write through `a`
/// comes right after `b` acknowledged the creation, before `a`'s follower has read it (most rounds: the review that
/// found it saw 85 of 100 item writes and 81 of 100 deletions answered `404`, the deleted collections kept for good).
extension LivePostgresTests {
    @Test func aCollectionCreatedThroughOneServerTakesWritesThroughAnotherAtOnce() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("across")
        let a = try ServerProcess(["--postgres", url, "--purge-delay-seconds", "1"])
        let b = try ServerProcess(["--postgres", url, "--purge-delay-seconds", "1"])
        let (throughA, throughB) = (a.client, b.client)
        let rounds = 25
        for round in 0..<rounds {
            for kind in ["item", "ops", "itemDeleted", "deleted"] {
                let name = "\(kind)\(round)"
                #expect(try throughB.put("/v1/collections/\(name)", ["sections": [["id": "s"]]]).status == 201)
                let status: Int
                switch kind {
                case "item": status = try throughA.put("/v1/collections/\(name)/items/i", ["data": round]).status
                case "ops":
                    status = try throughA.mutate(name, [["op": "insertItems", "at": [0, 0], "items": [["id": "i"]]]])
                        .status
                case "itemDeleted":
                    #expect(try throughB.put("/v1/collections/\(name)/items/i", ["data": round]).status == 201)
                    status = try throughA.request("DELETE", "/v1/collections/\(name)/items/i").status
                default: status = try throughA.request("DELETE", "/v1/collections/\(name)").status
                }
                let expected = ["item": 201, "ops": 200, "itemDeleted": 200, "deleted": 204][kind]
                #expect(status == expected, "\(kind) in round \(round)")
            }
        }
        // Both servers hold the outcome of every write.
        for server in [a, b] {
            let seen = try eventually {
                try (0..<rounds).allSatisfy { round in
                    let item = try server.client.get("/v1/collections/item\(round)/items/i")
                    let ops = try server.client.get("/v1/collections/ops\(round)/items/i")
                    let itemDeleted = try server.client.get("/v1/collections/itemDeleted\(round)/items/i")
                    let deleted = try server.client.get("/v1/collections/deleted\(round)")
                    return item.status == 200 && ops.status == 200 && itemDeleted.status == 404
                        && deleted.status == 404
                }
            }
            #expect(seen, "server on port \(server.port)")
        }
    }

    /// A write to a collection that was never created is still `404` with a shared database (its record is
    /// journaled, and applying it finds no collection), and its rows leave the database after `--purge-delay`, as a
    /// deleted collection's do (`Journal.noteMissingCollection`; a `DELETE` of the collection is cleaned up as any
    /// deletion is, so it names another); a server started afterwards serves as before.
    @Test func aWriteToANameNeverCreatedIs404AndLeavesNoRecords() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("never")
        let server = try ServerProcess(["--postgres", url, "--purge-delay-seconds", "1"])
        #expect(try server.client.put("/v1/collections/kept", ["sections": [["id": "s"]]]).status == 201)
        let refused = [
            try server.client.put("/v1/collections/never/items/i", ["data": 1]),
            try server.client.mutate("never", [["op": "insertItems", "at": [0, 0], "items": [["id": "i"]]]]),
            try server.client.request("DELETE", "/v1/collections/never/items/i"),
            try server.client.request("DELETE", "/v1/collections/neverDeleted"),
        ]
        for answer in refused {
            #expect(
                answer.status == 404
                    && (answer.object["error"] as? [String: Any])?["code"] as? String == "collection_not_found",
                "\(answer.text)")
        }
        let count = "SELECT count(*) FROM changeserver_records WHERE collection IN ('never', 'neverDeleted')"
        #expect(
            try eventually { try cluster.sql(count, database: "never") == "0\n" }, "the refused writes' rows are purged"
        )
        #expect(try server.client.get("/v1/collections/never").status == 404)
        let fresh = try ServerProcess(["--postgres", url])
        #expect(try fresh.client.get("/v1/collections/never").status == 404)
        #expect(try fresh.client.get("/v1/collections/kept").status == 200)
        #expect(try fresh.client.put("/v1/collections/never", ["sections": [["id": "s"]]]).status == 201)
        #expect(try eventually { try server.client.get("/v1/collections/never").status == 200 })
    }
}

/// A follower whose backend hangs (stopped here, as a frozen or stuck backend would be) is found out after
/// `--postgres-timeout` and reads again on a new connection: a write through its server to a collection another
/// server wrote first, which waits for the follower to read that write, is answered within seconds, not held for
/// as long as the backend hangs, and the store is reported down meanwhile.
extension LivePostgresTests {
    @Test func aStalledFollowerIsReplacedAndTheWritesWaitingForItAreAnswered() throws {
        let cluster = try PostgresCluster()
        let url = try cluster.createDatabase("follower")
        let a = try ServerProcess(["--postgres", url, "--postgres-timeout", "2"])
        let backend = try followerBackend(cluster, database: "follower")
        let b = try ServerProcess(["--postgres", url])
        #expect(try b.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        #expect(try eventually { try a.client.get("/v1/collections/c").status == 200 })
        kill(backend, SIGSTOP)
        defer { kill(backend, SIGCONT) }
        #expect(try b.client.put("/v1/collections/c/items/b", ["data": 1]).status == 201)
        let started = Date()
        let written = try Client(port: a.port, receiveTimeout: 60).put("/v1/collections/c/items/a", ["data": 2])
        let waited = Date().timeIntervalSince(started)
        #expect(written.status == 201 && waited < 20, "answered \(written.status) after \(waited) s")
        #expect(a.log.contains("has not answered the follower"))
        #expect(try eventually { try a.client.get("/healthz").text.contains(#""state":"up""#) })
        let items = try a.client.get("/v1/collections/c").text
        #expect(items.contains(#""id":"a""#) && items.contains(#""id":"b""#), "\(items)")
        #expect(try a.metric("changeserver_store_up") == 1)
    }
}
