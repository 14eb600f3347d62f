import Foundation
import ProcessSupport
import Testing

@Suite(.tags(.liveServer)) struct LiveMutationTests {
    /// A collection `c` with sections a [x, y, z] and b [w].
    static func seeded() throws -> (ServerProcess, String) {
        let server = try ServerProcess()
        let created = try server.client.put(
            "/v1/collections/c",
            [
                "sections": [
                    ["id": "a", "items": [["id": "x"], ["id": "y"], ["id": "z"]]], ["id": "b", "items": [["id": "w"]]],
                ]
            ])
        return (server, try #require(created.object["version"] as? String))
    }

    static func order(_ server: ServerProcess) throws -> [String] {
        let sections = try server.client.get("/v1/collections/c").object["sections"] as? [[String: Any]] ?? []
        return sections.map { section in
            let items = (section["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
            return "\(section["id"] as? String ?? "?")[\(items.joined(separator: " "))]"
        }
    }

    @Test func opsApplyInOrderAndAnswerTheChangeset() throws {
        let (server, version) = try Self.seeded()
        let response = try server.client.mutate(
            "c",
            [
                ["op": "insertItems", "at": ["b", 0], "items": [["id": "n", "data": ["t": 1]]]],
                ["op": "moveItem", "item": "x", "to": [1, 2]],
                ["op": "deleteItems", "items": [[0, 0], "w"]],
                ["op": "updateItems", "items": [["id": "z", "data": "zz"]]],
                ["op": "insertSections", "at": 0, "sections": [["id": "top", "data": 1]]],
                ["op": "updateSection", "section": "b", "data": ["h": "B"]],
                ["op": "moveSection", "section": "top", "to": 2],
            ])
        #expect(response.status == 200)
        let newVersion = try #require(response.object["version"] as? String)
        #expect(newVersion == version.dropLast() + "2")
        #expect(response.header("ETag") == "\"\(newVersion)\"")
        #expect(try Self.order(server) == ["a[z]", "b[n x]", "top[]"])
        let changes = try #require(response.object["changes"] as? [String: Any])
        #expect(changes["from"] as? String == version)
        #expect(changes["to"] as? String == newVersion)
        for kind in ["sections", "items"] {
            let group = try #require(changes[kind] as? [String: Any])
            #expect(Set(group.keys) == ["deleted", "inserted", "moved", "updated"])
        }
        let items = try #require(changes["items"] as? [String: Any])
        let updated = try #require(items["updated"] as? [[String: Any]])
        #expect(updated.contains { $0["id"] as? String == "z" && $0["data"] as? String == "zz" })
    }

    @Test func noOpMutationCommitsNothing() throws {
        let (server, version) = try Self.seeded()
        let response = try server.client.mutate("c", [["op": "moveItem", "item": "x", "to": ["a", 0]]])
        #expect(response.status == 200)
        #expect(response.object["version"] as? String == version)
        #expect(try server.client.get("/v1/collections/c").object["version"] as? String == version)
    }

    /// Every rejected mutation: its status, code and op index, and the collection left exactly as it was.
    @Test(arguments: [
        (
            #"{"ops":[{"op":"moveItem","item":"x","to":["b",0]},{"op":"deleteItems","items":["nope"]}]}"#, 409,
            "item_not_found", 1
        ),
        (#"{"ops":[{"op":"insertItems","at":[0,0],"items":[{"id":"w"}]}]}"#, 409, "duplicate_id", 0),
        (#"{"ops":[{"op":"insertItems","at":[0,4],"items":[{"id":"q"}]}]}"#, 409, "index_out_of_range", 0),
        (#"{"ops":[{"op":"insertItems","at":[0,-1],"items":[{"id":"q"}]}]}"#, 409, "index_out_of_range", 0),
        (
            #"{"ops":[{"op":"insertItems","at":[0,9223372036854775807],"items":[{"id":"q"}]}]}"#, 409,
            "index_out_of_range", 0
        ),
        (#"{"ops":[{"op":"insertItems","at":["zz",0],"items":[{"id":"q"}]}]}"#, 409, "section_not_found", 0),
        (#"{"ops":[{"op":"insertItems","at":[0,0],"items":[{"id":""}]}]}"#, 400, "invalid_id", 0),
        (#"{"ops":[{"op":"moveSection","section":-5,"to":0}]}"#, 409, "index_out_of_range", 0),
        (#"{"ops":[{"op":"moveSection","section":"nope","to":0}]}"#, 409, "section_not_found", 0),
        (#"{"ops":[{"op":"moveSection","section":0,"to":2}]}"#, 409, "index_out_of_range", 0),
        (#"{"ops":[{"op":"deleteSections","sections":["a","a"]}]}"#, 409, "duplicate_reference", 0),
        (#"{"ops":[{"op":"updateItems","items":[{"id":"nope","data":1}]}]}"#, 409, "item_not_found", 0),
        (#"{"ops":[{"op":"explode"}]}"#, 400, "unknown_op", 0),
        (#"{"ops":[{"op":"moveItem","item":"x"}]}"#, 400, "bad_request", 0),
        (#"{"ops":[{"op":"moveItem","item":"x","to":[0]}]}"#, 400, "bad_request", 0),
        (#"{"ops":[{"op":"moveItem","item":"x","to":[0,1.5]}]}"#, 400, "bad_request", 0),
        (#"{"ops":[{"op":"moveItem","item":true,"to":[0,1]}]}"#, 400, "bad_request", 0),
        (#"{"ops":[{"op":"deleteItems","items":["x"],"extra":1}]}"#, 400, "bad_request", 0),
        (#"{"ops":[{"op":"insertItems","at":[0,0],"items":[{"id":"q"}]},42]}"#, 400, "bad_request", 1),
    ])
    func rejectedOpsChangeNothing(_ body: String, _ status: Int, _ code: String, _ opIndex: Int) throws {
        let (server, version) = try Self.seeded()
        let before = try Self.order(server)
        let response = try server.client.request(
            "POST", "/v1/collections/c/mutations", headers: ["Content-Type": "application/json"], body: Array(body.utf8)
        )
        #expect(response.status == status)
        #expect(response.errorCode == code)
        #expect((response.object["error"] as? [String: Any])?["op"] as? Int == opIndex)
        #expect(((response.object["error"] as? [String: Any])?["message"] as? String)?.isEmpty == false)
        #expect(try Self.order(server) == before)
        #expect(try server.client.get("/v1/collections/c").object["version"] as? String == version)
    }

    /// Bodies that are not even a mutation: `400` with a JSON error, and nothing changes.
    @Test(arguments: [
        ("", "bad_json"), ("{", "bad_json"), (#"{"ops":[{"op":"deleteItems","items":["x"]}"#, "bad_json"),
        (#"{"ops": "nope"}"#, "bad_request"), ("[]", "bad_request"), ("42", "bad_request"),
        (#"{"ops":[],"x":1}"#, "bad_request"),
        (#"{"ops":[], "ops":[]}"#, "bad_json"),
        (#"{"ops":[{"op":"insertItems","at":[0,99999999999999999999],"items":[]}]}"#, "bad_json"),
        (#"{"ops":[{"op":"updateItems","items":[{"id":"x","data":1e999}]}]}"#, "bad_json"),
        (String(repeating: "[", count: 100) + String(repeating: "]", count: 100), "bad_json"),
        (#"{"ops":[{"op":"updateItems","items":[{"id":"x","data":"\u0000"}]}]}"#, "bad_json"),
    ])
    func malformedBodiesAre400(_ body: String, _ code: String) throws {
        let (server, version) = try Self.seeded()
        let response = try server.client.request(
            "POST", "/v1/collections/c/mutations", headers: ["Content-Type": "application/json"], body: Array(body.utf8)
        )
        #expect(response.status == 400)
        #expect(response.errorCode == code)
        #expect(try server.client.get("/v1/collections/c").object["version"] as? String == version)
    }

    @Test func invalidUTF8AndDeepNestingAre400() throws {
        let (server, version) = try Self.seeded()
        var body = Array(#"{"ops":[{"op":"updateItems","items":[{"id":"x","data":""#.utf8)
        body += [0xC3, 0x28]
        body += Array(#""}]}]}"#.utf8)
        let invalid = try server.client.request(
            "POST", "/v1/collections/c/mutations", headers: ["Content-Type": "application/json"], body: body)
        #expect(invalid.status == 400)
        #expect(invalid.errorCode == "bad_json")
        let deep =
            #"{"ops":[{"op":"updateItems","items":[{"id":"x","data":"# + String(repeating: "[", count: 70)
            + String(repeating: "]", count: 70) + "}]}]}"
        let nested = try server.client.request(
            "POST", "/v1/collections/c/mutations", headers: ["Content-Type": "application/json"], body: Array(deep.utf8)
        )
        #expect(nested.status == 400)
        #expect(try server.client.get("/v1/collections/c").object["version"] as? String == version)
    }

    @Test func mutationsOnMissingCollectionAre404() throws {
        let server = try ServerProcess()
        let response = try server.client.mutate("ghost", [["op": "deleteItems", "items": ["x"]]])
        #expect(response.status == 404)
        #expect(response.errorCode == "collection_not_found")
    }
}
