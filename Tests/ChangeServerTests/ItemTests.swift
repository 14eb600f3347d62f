import Foundation
import ProcessSupport
import Testing

@Suite(.tags(.liveServer)) struct LiveItemTests {
    @Test func upsertCreatesInLastSectionThenUpdatesAndMoves() throws {
        let (server, _) = try LiveMutationTests.seeded()
        let created = try server.client.put("/v1/collections/c/items/n", ["data": ["t": 1]])
        #expect(created.status == 201)
        #expect(try LiveMutationTests.order(server) == ["a[x y z]", "b[w n]"])
        let updated = try server.client.put(
            "/v1/collections/c/items/n", ["data": ["t": 2], "section": "a", "index": 0])
        #expect(updated.status == 200)
        #expect(try LiveMutationTests.order(server) == ["a[n x y z]", "b[w]"])
        let item = try server.client.get("/v1/collections/c/items/n")
        #expect(item.status == 200)
        #expect(item.text == #"{"id":"n","data":{"t":2},"at":[0,0]}"#)
        let sectionOnly = try server.client.put("/v1/collections/c/items/n", ["data": ["t": 2], "section": 1])
        #expect(sectionOnly.status == 200)
        #expect(try LiveMutationTests.order(server) == ["a[x y z]", "b[w n]"])
        let indexOnly = try server.client.put("/v1/collections/c/items/n", ["index": 0])
        #expect(indexOnly.status == 200)
        #expect(try LiveMutationTests.order(server) == ["a[x y z]", "b[n w]"])
        #expect(try server.client.get("/v1/collections/c/items/n").text == #"{"id":"n","data":null,"at":[1,0]}"#)
    }

    @Test func upsertIntoEmptyCollectionMakesDefaultSection() throws {
        let server = try ServerProcess()
        _ = try server.client.put("/v1/collections/e", ["sections": []])
        let created = try server.client.put("/v1/collections/e/items/first", ["data": "hello"])
        #expect(created.status == 201)
        let snapshot = try server.client.get("/v1/collections/e").object["sections"] as? [[String: Any]]
        #expect(snapshot?.first?["id"] as? String == "default")
    }

    @Test func idsWithSlashesAndUnicodeAreEncodedInThePath() throws {
        let (server, _) = try LiveMutationTests.seeded()
        #expect(try server.client.put("/v1/collections/c/items/a%2Fb%20%C3%A9", ["data": 1]).status == 201)
        let item = try server.client.get("/v1/collections/c/items/a%2Fb%20%C3%A9")
        #expect(item.object["id"] as? String == "a/b é")
    }

    @Test func deleteAnswersChangesetAnd404WhenAbsent() throws {
        let (server, version) = try LiveMutationTests.seeded()
        let deleted = try server.client.request("DELETE", "/v1/collections/c/items/y")
        #expect(deleted.status == 200)
        let items = (deleted.object["changes"] as? [String: Any])?["items"] as? [String: Any]
        #expect((items?["deleted"] as? [[String: Any]])?.first?["at"] as? [Int] == [0, 1])
        #expect(deleted.object["version"] as? String == version.dropLast() + "2")
        let again = try server.client.request("DELETE", "/v1/collections/c/items/y")
        #expect(again.status == 404)
        #expect(again.errorCode == "item_not_found")
        #expect(try server.client.get("/v1/collections/c/items/y").status == 404)
        #expect(try server.client.get("/v1/collections/ghost/items/y").errorCode == "collection_not_found")
    }

    @Test func badUpsertsChangeNothing() throws {
        let (server, version) = try LiveMutationTests.seeded()
        let cases: [(Any, Int)] = [
            (["data": 1, "section": "nope"], 409), (["data": 1, "index": 99], 409),
            (["data": 1, "section": true], 400),
            (["data": 1, "index": "0"], 400), (["data": 1, "colour": "red"], 400), ([1, 2], 400),
        ]
        for (body, status) in cases {
            #expect(try server.client.put("/v1/collections/c/items/q", body).status == status, "\(body)")
        }
        let longID = String(repeating: "i", count: 257)
        #expect(try server.client.put("/v1/collections/c/items/\(longID)", ["data": 1]).status == 400)
        #expect(try server.client.put("/v1/collections/ghost/items/q", ["data": 1]).status == 404)
        #expect(try server.client.get("/v1/collections/c").object["version"] as? String == version)
    }
}
