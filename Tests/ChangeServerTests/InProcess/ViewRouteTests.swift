import Foundation
import Testing

@testable import ChangeServer

/// Views through their routes, in-process: API.md's "Views" section, its example included.
@Suite struct InProcessViewRouteTests {
    private static let board =
        #"{"source": "tasks", "sectionBy": {"field": "/status"}, "sortBy": [{"field": "/priority", "order": "desc"}]}"#

    private static func tasks(_ server: InProcessServer) {
        let body = #"""
            {"sections": [{"id": "s", "items": [
              {"id": "t1", "data": {"status": "open", "priority": 3}},
              {"id": "t2", "data": {"status": "open", "priority": 1}},
              {"id": "t3", "data": {"status": "doing", "priority": 2}}]}]}
            """#
        #expect(server.send("PUT", "/v1/collections/tasks", body: body).status == 201)
    }

    private static func sections(_ answer: Answer) -> [[String: Any]] {
        answer.json["sections"] as? [[String: Any]] ?? []
    }

    private static func itemIDs(_ section: [String: Any]) -> [String] {
        (section["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }

    private static func changes(_ answer: Answer) -> (
        sections: [String: [[String: Any]]], items: [String: [[String: Any]]]
    ) {
        let changes = answer.json["changes"] as? [String: Any] ?? [:]
        return (
            changes["sections"] as? [String: [[String: Any]]] ?? [:],
            changes["items"] as? [String: [[String: Any]]] ?? [:]
        )
    }

    @Test func theContractsExample() throws {
        let server = try InProcessServer()
        Self.tasks(server)
        let defined = server.send("PUT", "/v1/views/board", body: Self.board)
        #expect(defined.status == 201)
        #expect(defined.json["view"] as? String == "board")
        let view = server.send("GET", "/v1/views/board")
        #expect(Self.sections(view).map { $0["id"] as? String } == [#""doing""#, #""open""#])
        #expect(Self.sections(view).map(Self.itemIDs) == [["t3"], ["t1", "t2"]])
        #expect((Self.sections(view).first?["data"] as? [String: Any])?["key"] as? String == "doing")
        #expect((view.json["definition"] as? [String: Any])?["source"] as? String == "tasks")
        let start = try #require(view.json["version"] as? String)

        _ = server.send("PUT", "/v1/collections/tasks/items/t2", body: #"{"data": {"status": "open", "priority": 5}}"#)
        let moved = server.send("GET", "/v1/views/board/changes?since=\(start)")
        let (sections, items) = Self.changes(moved)
        #expect(items["moved"]?.count == 1)
        #expect(items["updated"]?.first?["id"] as? String == "t2")
        #expect(items["updated"]?.first?["at"] as? [Int] == [1, 0])
        #expect(sections.values.allSatisfy { $0.isEmpty })
        let second = try #require(moved.json["to"] as? String)

        _ = server.send(
            "PUT", "/v1/collections/tasks/items/t3", body: #"{"data": {"status": "blocked", "priority": 2}}"#)
        let (regrouped, regroupedItems) = Self.changes(server.send("GET", "/v1/views/board/changes?since=\(second)"))
        #expect(regrouped["deleted"]?.first?["index"] as? Int == 0)
        #expect(regrouped["deleted"]?.first?["id"] as? String == #""doing""#)
        #expect(regrouped["inserted"]?.first?["index"] as? Int == 0)
        #expect(regrouped["inserted"]?.first?["id"] as? String == #""blocked""#)
        #expect(regrouped["moved"]?.isEmpty == true)
        #expect(regroupedItems.values.allSatisfy { $0.isEmpty })
    }

    /// "é" as U+00E9 and as "e" + U+0301 are different keys (their canonical JSON differs), though Swift's `String`
    /// finds them equal: grouping them once trapped the server, at the definition and at a write to the source.
    @Test func canonicallyEquivalentKeysAreTwoSections() throws {
        let server = try InProcessServer()
        let source = #"""
            {"sections": [{"id": "s", "items": [
              {"id": "a", "data": {"k": "e\u0301"}}, {"id": "b", "data": {"k": "f"}}]}]}
            """#
        #expect(server.send("PUT", "/v1/collections/src", body: source).status == 201)
        let definition = #"{"source": "src", "sectionBy": {"field": "/k"}}"#
        #expect(server.send("PUT", "/v1/views/keys", body: definition).status == 201)
        let insert = #"{"ops": [{"op": "insertItems", "at": [0, 2], "items": [{"id": "c", "data": {"k": "\u00e9"}}]}]}"#
        #expect(server.send("POST", "/v1/collections/src/mutations", body: insert).status == 200)
        let view = server.send("GET", "/v1/views/keys")
        #expect(view.status == 200)
        let ids = Self.sections(view).compactMap { $0["id"] as? String }.map { Array($0.utf8) }
        #expect(Set(ids) == [Array("\"e\u{301}\"".utf8), Array("\"\u{E9}\"".utf8), Array("\"f\"".utf8)])
        #expect(Self.sections(view).map(Self.itemIDs).sorted { $0[0] < $1[0] } == [["a"], ["b"], ["c"]])
    }

    /// Numbers compare by value exactly, as written: nanosecond timestamps past 2^53 filter and sort as they are
    /// (one `Double` apart, they were compared as equal), and `1` and `1.0` tie in a sort, the id breaking the tie.
    @Test func numbersAreComparedExactlyAndEqualValuesTie() throws {
        let server = try InProcessServer()
        let source = #"""
            {"sections": [{"id": "s", "items": [
              {"id": "e1", "data": {"ts": 1700000000000000001, "v": -1700000000000000001, "p": 1}},
              {"id": "e2", "data": {"ts": 1700000000000000100, "v": -1700000000000000100, "p": 1.0}}]}]}
            """#
        #expect(server.send("PUT", "/v1/collections/ev", body: source).status == 201)
        let minimum = #"{"sections": [{"id": "s", "items": [{"id": "m", "data": {"k": -9223372036854775808}}]}]}"#
        #expect(server.send("PUT", "/v1/collections/min", body: minimum).status == 201)
        let views = [
            ("newer", #"{"source": "ev", "filter": {"field": "/ts", "gt": 1700000000000000001}}"#, ["e2"]),
            ("older", #"{"source": "ev", "filter": {"field": "/ts", "lt": 1700000000000000100}}"#, ["e1"]),
            ("up to", #"{"source": "ev", "filter": {"field": "/ts", "le": 1700000000000000099}}"#, ["e1"]),
            ("by v", #"{"source": "ev", "sortBy": [{"field": "/v"}]}"#, ["e2", "e1"]),
            ("by p", #"{"source": "ev", "sortBy": [{"field": "/p", "order": "desc"}]}"#, ["e1", "e2"]),
            // A real compares by its shortest text, -9.223372036854776e+18 (the README), below the integer -2^63
            // that its float's binary value equals.
            ("real le", #"{"source": "min", "filter": {"field": "/k", "le": -9.223372036854775808e18}}"#, []),
            ("real ge", #"{"source": "min", "filter": {"field": "/k", "ge": -9.223372036854775808e18}}"#, ["m"]),
        ]
        for (index, (name, definition, expected)) in views.enumerated() {
            #expect(server.send("PUT", "/v1/views/v\(index)", body: definition).status == 201)
            let items = Self.sections(server.send("GET", "/v1/views/v\(index)")).flatMap(Self.itemIDs)
            #expect(items == expected, "\(name)")
        }
    }

    @Test func aViewOfAMissingSourceFillsWhenItIsCreatedAndEmptiesWhenItIsDeleted() throws {
        let server = try InProcessServer()
        #expect(server.send("PUT", "/v1/views/all", body: #"{"source": "tasks"}"#).status == 201)
        let empty = server.send("GET", "/v1/views/all")
        #expect(Self.sections(empty).map { $0["id"] as? String } == ["all"])
        #expect(Self.sections(empty).map(Self.itemIDs) == [[]])
        let epoch = try #require((empty.json["version"] as? String)?.split(separator: ".").first)
        Self.tasks(server)
        let filled = server.send("GET", "/v1/views/all")
        #expect(Self.sections(filled).map(Self.itemIDs) == [["t1", "t2", "t3"]])
        #expect(server.send("DELETE", "/v1/collections/tasks").status == 204)
        let emptied = server.send("GET", "/v1/views/all")
        #expect(Self.sections(emptied).map(Self.itemIDs) == [[]])
        Self.tasks(server)
        let again = server.send("GET", "/v1/views/all")
        #expect(Self.sections(again).map(Self.itemIDs) == [["t1", "t2", "t3"]])
        #expect((again.json["version"] as? String)?.split(separator: ".").first == epoch)
        #expect((again.json["version"] as? String)?.hasSuffix(".4") == true)
    }

    /// Views of one field's values (one per user) are handed only the writes that touch their values
    /// (`ViewDispatch`): they still follow every write that does, also after a view is redefined onto other values
    /// or another source, deleted and defined again, when each write must reach the view's new values.
    @Test func viewsOfOneValueEachFollowTheWritesToTheirValues() throws {
        let server = try InProcessServer()
        let empty = #"{"sections": [{"id": "s", "items": []}]}"#
        #expect(server.send("PUT", "/v1/collections/convs", body: empty).status == 201)
        #expect(server.send("PUT", "/v1/collections/other", body: empty).status == 201)
        func define(_ view: String, _ source: String, _ owner: String) {
            let filter = #"{"all": [{"field": "/owner", "eq": "\#(owner)"}, {"field": "/archived", "ne": true}]}"#
            let body = #"{"source": "\#(source)", "filter": \#(filter), "sortBy": [{"field": "/at", "order": "desc"}]}"#
            #expect((200...201).contains(server.send("PUT", "/v1/views/\(view)", body: body).status), "\(view)")
        }
        func write(_ source: String, _ id: String, _ owner: String, at: Int, archived: Bool = false) {
            let body = #"{"data": {"owner": "\#(owner)", "at": \#(at), "archived": \#(archived)}}"#
            #expect(
                (200...201).contains(server.send("PUT", "/v1/collections/\(source)/items/\(id)", body: body).status))
        }
        func shown(_ view: String) -> [String] {
            Self.sections(server.send("GET", "/v1/views/\(view)")).flatMap(Self.itemIDs)
        }
        for user in 1...4 { define("u\(user)", "convs", "u\(user)") }
        write("convs", "c1", "u1", at: 1)
        write("convs", "c2", "u1", at: 2)
        write("convs", "c3", "u2", at: 3)
        #expect(shown("u1") == ["c2", "c1"] && shown("u2") == ["c3"] && shown("u3") == [])
        // From one user to another: it leaves one view and enters the other.
        write("convs", "c1", "u3", at: 4)
        #expect(shown("u1") == ["c2"] && shown("u3") == ["c1"])
        write("convs", "c2", "u1", at: 5, archived: true)
        #expect(shown("u1") == [])
        // Redefined onto another user's values: writes to them reach it now, and writes to its old values do not.
        define("u4", "convs", "u2")
        #expect(shown("u4") == ["c3"])
        write("convs", "c4", "u2", at: 6)
        write("convs", "c5", "u4", at: 7)
        #expect(shown("u4") == ["c4", "c3"] && shown("u2") == ["c4", "c3"])
        // Onto another source, then deleted and defined again on the first.
        define("u3", "other", "u3")
        write("other", "o1", "u3", at: 8)
        write("convs", "c6", "u3", at: 9)
        #expect(shown("u3") == ["o1"])
        #expect(server.send("DELETE", "/v1/views/u3").status == 204)
        define("u3", "convs", "u3")
        write("convs", "c7", "u3", at: 10)
        #expect(shown("u3") == ["c7", "c6", "c1"])
        #expect(server.send("DELETE", "/v1/collections/convs/items/c1").status == 200)
        #expect(shown("u3") == ["c7", "c6"])
    }

    @Test func redefiningKeepsTheEpochAndMovesItems() throws {
        let server = try InProcessServer()
        Self.tasks(server)
        let first = server.send(
            "PUT", "/v1/views/list", body: #"{"source": "tasks", "sortBy": [{"field": "/priority"}]}"#)
        let version = try #require(first.json["version"] as? String)
        let second = server.send(
            "PUT", "/v1/views/list", body: #"{"source": "tasks", "sortBy": [{"field": "/priority", "order": "desc"}]}"#)
        #expect(second.status == 200)
        let next = try #require(second.json["version"] as? String)
        #expect(next.split(separator: ".").first == version.split(separator: ".").first)
        #expect(Self.changes(second).items["moved"]?.count == 2)
        let same = server.send(
            "PUT", "/v1/views/list", body: #"{"source": "tasks", "sortBy": [{"field": "/priority", "order": "desc"}]}"#)
        #expect(same.status == 200)
        #expect(same.json["version"] as? String == next)
        // Another definition that gives the same content commits a version with an empty changeset: the snapshot
        // shows the definition, so its ETag changes (no `304` for the old one), and an `If-Match` of the old version
        // fails (a second client's redefinition is not lost).
        #expect(server.send("GET", "/v1/views/list").status == 200)
        let other = #"{"source": "tasks", "sortBy": [{"field": "/priority", "order": "desc"}, {"field": "/x"}]}"#
        let redefined = server.send("PUT", "/v1/views/list", body: other, headers: [("If-Match", "\"\(next)\"")])
        #expect(redefined.status == 200)
        let third = try #require(redefined.json["version"] as? String)
        #expect(third != next)
        let empty = Self.changes(redefined)
        #expect(empty.items.values.allSatisfy { $0.isEmpty } && empty.sections.values.allSatisfy { $0.isEmpty })
        let shown = server.send("GET", "/v1/views/list", headers: [("If-None-Match", "\"\(next)\"")])
        #expect(shown.status == 200)
        #expect(((shown.json["definition"] as? [String: Any])?["sortBy"] as? [Any])?.count == 2)
        let late = server.send(
            "PUT", "/v1/views/list", body: #"{"source": "tasks"}"#, headers: [("If-Match", "\"\(next)\"")])
        #expect(late.status == 412)
        #expect(server.send("GET", "/v1/views/list/changes?since=\(version)").json["to"] as? String == third)
        let feed = server.send("GET", "/v1/views/list/changes?since=\(next)")
        #expect(feed.json["to"] as? String == third)
        // The same definition again commits nothing.
        #expect(server.send("PUT", "/v1/views/list", body: other).json["version"] as? String == third)
    }

    @Test func limitFilterAndList() throws {
        let server = try InProcessServer()
        Self.tasks(server)
        let body =
            #"{"source": "tasks", "filter": {"field": "/status", "eq": "open"}, "sortBy": [{"field": "/priority"}], "limit": 1}"#
        #expect(server.send("PUT", "/v1/views/top", body: body).status == 201)
        #expect(Self.sections(server.send("GET", "/v1/views/top")).map(Self.itemIDs) == [["t2"]])
        let list = server.send("GET", "/v1/views").json["views"] as? [[String: Any]]
        #expect(list?.first?["name"] as? String == "top")
        #expect(list?.first?["source"] as? String == "tasks")
        #expect(list?.first?["items"] as? Int == 1)
        #expect(list?.first?["sections"] as? Int == 1)
    }

    @Test(arguments: [
        (#"{"sortBy": []}"#, "source"),
        (#"{"source": "tasks", "colour": 1}"#, "colour"),
        (#"{"source": "tasks", "limit": 0}"#, "limit"),
        (#"{"source": "tasks", "filter": {"field": "/a", "eq": 1, "lt": 2}}"#, "filter"),
        (#"{"source": "tasks", "filter": {"field": "/a", "near": 1}}"#, "filter"),
        (
            #"{"source": "tasks", "filter": {"not": {"field": "/a", "lt": [1]}}}"#,
            "filter.not.lt: must be a number or a string"
        ),
        (
            #"{"source": "tasks", "filter": {"any": [{"field": "/a", "eq": 1}, {"field": "/a", "ge": null}]}}"#,
            "filter.any[1].ge"
        ),
        (#"{"source": "tasks", "sortBy": [{"field": "no-slash"}]}"#, "sortBy"),
        (#"{"source": "-bad"}"#, "source"),
        (#"[1]"#, "object"),
    ])
    func invalidDefinitionsAre400AndChangeNothing(body: String, part: String) throws {
        let server = try InProcessServer()
        let answer = server.send("PUT", "/v1/views/v", body: body)
        #expect(answer.status == 400)
        #expect(answer.errorCode == "invalid_view")
        let message = (answer.json["error"] as? [String: Any])?["message"] as? String ?? ""
        #expect(message.contains(part), "\(message)")
        #expect(server.send("GET", "/v1/views/v").errorCode == "view_not_found")
    }

    /// An item of a view is read with where the view shows it (in a leaderboard, its rank), without the whole view;
    /// one the view leaves out is `404`, and the item's URL takes no write.
    @Test func anItemIsReadWithWhereTheViewShowsIt() throws {
        let server = try InProcessServer()
        let players =
            #"{"sections": [{"id": "s", "items": [{"id": "a", "data": {"score": 5}}, "#
            + #"{"id": "b", "data": {"score": 9}}, {"id": "c", "data": {"score": 7}}]}]}"#
        #expect(server.send("PUT", "/v1/collections/players", body: players).status == 201)
        let top =
            #"{"source": "players", "filter": {"field": "/score", "ge": 6}, "sortBy": [{"field": "/score", "order": "desc"}]}"#
        #expect(server.send("PUT", "/v1/views/top", body: top).status == 201)
        let c = server.send("GET", "/v1/views/top/items/c")
        #expect(c.status == 200 && c.text == #"{"id":"c","data":{"score":7},"at":[0,1]}"#, "\(c.text)")
        #expect(server.send("HEAD", "/v1/views/top/items/b").status == 200)
        let left = server.send("GET", "/v1/views/top/items/a")
        #expect(left.status == 404 && left.errorCode == "item_not_found" && left.text.contains("view 'top'"))
        #expect(server.send("GET", "/v1/views/none/items/a").errorCode == "view_not_found")
        let write = server.send("PUT", "/v1/views/top/items/c", body: #"{"data": 1}"#)
        #expect(write.status == 405 && write.header("Allow") == "GET, HEAD, OPTIONS")
        #expect(server.send("DELETE", "/v1/views/top/items/c").status == 405)
    }

    @Test func viewsAreReadOnlyAndDeletable() throws {
        let server = try InProcessServer()
        let defined = server.send("PUT", "/v1/views/v", body: #"{"source": "tasks"}"#)
        let version = try #require(defined.json["version"] as? String)
        #expect(server.send("GET", "/v1/views/v", headers: [("If-None-Match", "\"\(version)\"")]).status == 304)
        let post = server.send("POST", "/v1/views/v")
        #expect(post.status == 405)
        #expect(post.header("Allow") == "GET, HEAD, PUT, DELETE, OPTIONS")
        #expect(server.send("POST", "/v1/views/v/mutations", body: "{}").status == 405)
        #expect(server.send("PUT", "/v1/views/v/items/x", body: "{}").status == 405)
        #expect(server.send("GET", "/v1/views/v/changes").json["reset"] as? Bool == true)
        #expect(server.send("GET", "/v1/views/v/changes?since=\(version)&timeout=5").held != nil)
        #expect(server.send("DELETE", "/v1/views/v").status == 204)
        #expect(server.send("DELETE", "/v1/views/v").errorCode == "view_not_found")
        #expect(server.send("GET", "/v1/views/v/changes").status == 404)
    }

    /// A section's id is its key's text, at most 256 bytes: a longer key leaves its item out (README, "Views").
    @Test func anItemWhoseSectionKeyIsTooLongForAnIdIsLeftOut() throws {
        let server = try InProcessServer()
        let fits = String(repeating: "x", count: 254)
        let long = String(repeating: "y", count: 255)
        let body = """
            {"sections": [{"id": "s", "items": [{"id": "fits", "data": {"k": "\(fits)"}},
              {"id": "long", "data": {"k": "\(long)"}}]}]}
            """
        #expect(server.send("PUT", "/v1/collections/keys", body: body).status == 201)
        let view = server.send("PUT", "/v1/views/v", body: #"{"source": "keys", "sectionBy": {"field": "/k"}}"#)
        #expect(view.status == 201)
        let sections = Self.sections(server.send("GET", "/v1/views/v"))
        #expect(sections.map { $0["id"] as? String } == ["\"\(fits)\""])
        #expect(sections.map(Self.itemIDs) == [["fits"]])
    }

    /// API.md: every mutation accepts `If-Match`; a view's definition and deletion are mutations too.
    @Test func definitionsAndDeletionsHonourConditions() throws {
        let server = try InProcessServer()
        Self.tasks(server)
        let missing = server.send(
            "PUT", "/v1/views/v", body: #"{"source": "tasks"}"#, headers: [("If-Match", #""nope.7""#)])
        #expect(missing.status == 412 && missing.json["current"] == nil)
        #expect(server.send("GET", "/v1/views/v").errorCode == "view_not_found")
        let created = server.send(
            "PUT", "/v1/views/v", body: #"{"source": "tasks"}"#, headers: [("If-None-Match", "*")])
        #expect(created.status == 201)
        let version = try #require(created.json["version"] as? String)
        let again = server.send("PUT", "/v1/views/v", body: #"{"source": "other"}"#, headers: [("If-None-Match", "*")])
        #expect(again.status == 412)
        #expect(again.errorCode == "precondition_failed" && again.json["current"] as? String == version)
        let message = (again.json["error"] as? [String: Any])?["message"] as? String ?? ""
        #expect(message.contains("the view's version"), "\(message)")
        let definition = server.send("GET", "/v1/views/v").json["definition"] as? [String: Any]
        #expect(definition?["source"] as? String == "tasks")
        let stale = server.send(
            "PUT", "/v1/views/v", body: #"{"source": "other"}"#, headers: [("If-Match", "\"\(version)0\"")])
        #expect(stale.status == 412)
        let weak = server.send(
            "PUT", "/v1/views/v", body: #"{"source": "other"}"#, headers: [("If-Match", "W/\"\(version)\"")])
        #expect(weak.status == 412)
        #expect(weak.json["current"] as? String == version)
        let redefined = server.send(
            "PUT", "/v1/views/v", body: #"{"source": "other"}"#, headers: [("If-Match", "\"\(version)\"")])
        #expect(redefined.status == 200)
        let current = try #require(redefined.json["version"] as? String)
        #expect(server.send("DELETE", "/v1/views/v", headers: [("If-Match", "\"\(version)\"")]).status == 412)
        #expect(server.send("GET", "/v1/views/v").status == 200)
        #expect(server.send("DELETE", "/v1/views/v", headers: [("If-Match", "\"\(current)\"")]).status == 204)
        #expect(server.send("GET", "/v1/views/v").errorCode == "view_not_found")
    }

    @Test func tokens() throws {
        let server = try InProcessServer(["--write-token", "w", "--read-token", "r"])
        #expect(
            server.send("PUT", "/v1/views/v", body: #"{"source": "s"}"#, headers: [("Authorization", "Bearer r")])
                .status == 401)
        #expect(
            server.send("PUT", "/v1/views/v", body: #"{"source": "s"}"#, headers: [("Authorization", "Bearer w")])
                .status == 201)
        #expect(server.send("GET", "/v1/views/v").status == 401)
        #expect(server.send("GET", "/v1/views/v", headers: [("Authorization", "Bearer r")]).status == 200)
    }

    /// `sortBy` holds at most `ViewDefinition.maximumSortKeys` keys: each one costs every item of the view, and a
    /// list of thousands held up the source's writes for seconds while the view was built.
    @Test func sortByHoldsAtMostSixteenKeys() throws {
        let server = try InProcessServer()
        Self.tasks(server)
        func definition(keys: Int) -> String {
            let sortBy = (0..<keys).map { #"{"field": "/f\#($0)"}"# }.joined(separator: ",")
            return #"{"source": "tasks", "sortBy": [\#(sortBy)]}"#
        }
        let refused = server.send("PUT", "/v1/views/v", body: definition(keys: 17))
        #expect(refused.status == 400)
        #expect(refused.errorCode == "invalid_view")
        #expect(refused.text.contains("sortBy: 17 keys, more than 16"), "\(refused.text)")
        #expect(server.send("GET", "/v1/views/v").status == 404)
        #expect(server.send("PUT", "/v1/views/v", body: definition(keys: 16)).status == 201)
        let repeated = server.send(
            "PUT", "/v1/views/w", body: #"{"source": "tasks", "sortBy": [{"field": ""}, {"field": ""}]}"#)
        #expect(repeated.status == 400 && repeated.errorCode == "invalid_view")
        #expect(repeated.text.contains(#"sortBy[1].field: repeats sortBy[0]'s field \"\""#), "\(repeated.text)")
        #expect(server.send("GET", "/v1/views/w").status == 404)
    }

    /// The `in` lists of a definition hold at most `ViewDefinition.maximumListValues` values together; a long list
    /// is looked up by hash, so that a view of the largest one allowed is built as quickly as one of a few values.
    @Test func inListsHoldAtMostTenThousandValues() throws {
        let server = try InProcessServer()
        Self.tasks(server)
        func definition(values: Int) -> String {
            let list = (0..<values).map { "\"v\($0)\"" }.joined(separator: ",")
            return #"{"source": "tasks", "filter": {"field": "/status", "in": [\#(list), "doing"]}}"#
        }
        let refused = server.send("PUT", "/v1/views/v", body: definition(values: 10_000))
        #expect(refused.status == 400)
        #expect(refused.errorCode == "invalid_view")
        #expect(refused.text.contains("10001 values in its in lists, more than 10000"), "\(refused.text)")
        #expect(server.send("GET", "/v1/views/v").status == 404)
        let defined = server.send("PUT", "/v1/views/v", body: definition(values: 9_999))
        #expect(defined.status == 201)
        let shown = Self.sections(server.send("GET", "/v1/views/v"))
        #expect(shown.flatMap(Self.itemIDs) == ["t3"], "the view shows the task doing")
    }

    /// A large definition is decoded off the event loop, on the view's lane, as every large body is.
    @Test func largeDefinitionsAreDecodedOffTheLoop() throws {
        let server = try InProcessServer()
        Self.tasks(server)
        let values = (0..<10000).map { "\"v\($0)\"" }.joined(separator: ",")
        func request(sortKeys: Int) -> Request {
            let sortBy = (0..<sortKeys).map { #"{"field": "/f\#($0)"}"# }.joined(separator: ",")
            let body =
                #"{"source": "tasks", "filter": {"field": "/status", "in": [\#(values)]}, "sortBy": [\#(sortBy)]}"#
            return Request(method: "PUT", path: "/v1/views/big", body: Array(body.utf8))
        }
        #expect(request(sortKeys: 1).body.count >= App.largeBodyBytes)
        for (keys, status) in [(17, 400), (1, 201)] {
            let connection = RecordingConnection()
            let result = server.app.handle(request(sortKeys: keys), screened: nil, on: connection).result
            guard case .later = result else {
                Issue.record("a large definition was decoded on the loop (\(keys) keys)")
                continue
            }
            #expect(connection.wait().status == status, "\(keys) keys")
        }
        #expect(server.send("GET", "/v1/views/big").status == 200)
    }
}
