import Foundation
import Model
import ProcessSupport
import Testing

@testable import ChangeFeedClient

/// `ChangeServerClient` against a live server: every request it sends, what the answers decode to, and every
/// kind of failure, typed.
@Suite("LiveWriteClientTests", .tags(.liveServer), .serialized, .timeLimit(.minutes(5)))
struct LiveWriteClientTests {
    static func section(_ id: String, _ items: [String], data: String = "null") -> Section {
        Section(id: id, data: JSONData(canonical: data), items: items.map { Item(id: $0) })
    }

    @Test func writesAndReadsTheirAnswers() async throws {
        let server = try await ServerProcess.started()
        let client = ChangeServerClient(baseURL: server.baseURL)
        let created = try await client.put("inbox", sections: [Self.section("today", ["a", "b"], data: #"{"t":1}"#)])
        #expect(created.created && created.version.seq == 1)
        #expect(created.changes.from.seq == 0 && created.changes.items.inserted.isEmpty)

        let replaced = try await client.put("inbox", sections: [Self.section("today", ["b", "a"])])
        #expect(!replaced.created && replaced.version == created.version.next)
        #expect(replaced.changes.items.moved.count == 1 && replaced.changes.sections.updated.count == 1)

        let data = JSONData(canonical: #"{"text":"hi"}"#)
        let upserted = try await client.upsert("m1", in: "inbox", data: data, section: .id("today"), index: 0)
        #expect(upserted.created)
        #expect(upserted.changes.items.inserted.map(\.item) == [Item(id: "m1", data: data)])
        let updated = try await client.upsert("m1", in: "inbox", data: .null)
        #expect(!updated.created && updated.changes.items.updated.count == 1)

        let (item, at) = try await client.item("m1", in: "inbox")
        #expect(item == Item(id: "m1") && at == ItemPath(section: 0, item: 0))

        let deleted = try await client.deleteItem("m1", from: "inbox")
        #expect(deleted.changes.items.deleted.map(\.id) == ["m1"])

        // Ids are one path segment each, whatever they hold.
        var last = deleted.version
        for id in ["a/b", "sp ace", "q?x=1", "50%", "#h", "é", ".", "..", "..."] {
            let result = try await client.upsert(id, in: "inbox")
            #expect(result.created, "\(id)")
            last = result.version
            #expect(try await client.item(id, in: "inbox").item.id == id)
        }
        let snapshot = try await client.snapshot(of: "inbox")
        #expect(snapshot.name == "inbox" && snapshot.version == last)
        let ids = snapshot.sections.flatMap { $0.items.map(\.id) }
        #expect(ids == ["b", "a", "a/b", "sp ace", "q?x=1", "50%", "#h", "é", ".", "..", "..."])
        // Dot segments are escaped: `…/items/..` was the collection's own path, and this deleted the collection.
        #expect(try await client.deleteItem("..", from: "inbox").changes.items.deleted.map(\.id) == [".."])
        #expect(try await client.snapshot(of: "inbox").sections[0].items.count == ids.count - 1)
        do throws(WriteError) {
            _ = try await client.upsert("", in: "inbox")
            Issue.record("an empty id was sent")
        } catch {
            guard case .invalidURL = error else { throw error }
        }

        try await client.deleteCollection("inbox")
        do throws(WriteError) {
            _ = try await client.snapshot(of: "inbox")
            Issue.record("a deleted collection was read")
        } catch {
            #expect(error.code == .collectionNotFound)
        }
        await server.stopped()
    }

    /// Every kind of op goes out in the wire format: random ops applied through the client and to a local
    /// `VersionedCollection` give the same changesets and the same content.
    @Test func everyOpIsSentAsTheServerReadsIt() async throws {
        let server = try await ServerProcess.started()
        let client = ChangeServerClient(baseURL: server.baseURL)
        var history = RandomHistory(seed: 0x5EED_C11E)
        let start = history.sections(3, maxItems: 4)
        var local = try VersionedCollection(epoch: "local", sections: start)
        _ = try await client.put("ops", sections: start)
        var kinds = Set<String>()
        for _ in 0..<200 {
            let ops = (0..<history.int(1...3)).compactMap { _ in Self.op(&history, on: local.snapshot()) }
            guard !ops.isEmpty else { continue }
            var trial = local
            guard let expected = try? trial.apply(ops) else { continue }
            local = trial
            let result = try await client.apply(ops, to: "ops")
            #expect(result.changes.sections == expected.sections && result.changes.items == expected.items)
            for op in ops { kinds.insert(String(describing: op).prefix { $0 != "(" }.description) }
        }
        #expect(try await client.snapshot(of: "ops").sections == local.snapshot())
        #expect(kinds.count == 8, "every kind of op was sent: \(kinds.sorted())")
        await server.stopped()
    }

    /// The app's loop: follow with `FeedClient`, write with `ChangeServerClient` on the mirror's version
    /// (`.at`), and the feed brings every write; two writers on one version: one is refused, and retries on the
    /// version its feed brought.
    @Test func aFollowerSeesEveryWriteAndConditionalWritesDoNotLoseEachOther() async throws {
        let server = try await ServerProcess.started()
        let client = ChangeServerClient(baseURL: server.baseURL)
        _ = try await client.put(
            "counter", sections: [Section(id: "s", items: [Item(id: "n", data: .init(canonical: "0"))])])
        var follower = Follower(
            FeedClient(baseURL: server.baseURL, name: "counter", backoff: LiveFeedClientTests.fastBackoff))
        try await follower.catchUp(to: "\(try await client.snapshot(of: "counter").version)")
        var refused = 0
        for round in 0..<40 {
            let version = try #require(follower.live.version)
            let value = try follower.live.item(at: IndexPath(indexes: [0, 0])).data.decoded(as: Int.self)
            if round.isMultiple(of: 4) {
                // Another writer gets in first.
                _ = try await client.upsert("n", in: "counter", data: JSONData(canonical: "\(value + 1)"))
            }
            do {
                let result = try await client.upsert(
                    "n", in: "counter", data: JSONData(canonical: "\(value + 1)"), if: .at(version))
                try await follower.catchUp(to: "\(result.version)")
            } catch let error as WriteError where error.code == .preconditionFailed {
                refused += 1
                // The refusal names the version to catch up to.
                let current = try #require(error.current)
                #expect(current == (try await client.snapshot(of: "counter").version))
                try await follower.catchUp(to: "\(current)")
            }
        }
        #expect(refused == 10)
        #expect(try await client.item("n", in: "counter").item.data.decoded(as: Int.self) == 40)
        #expect(follower.live.sections == (try await client.snapshot(of: "counter")).sections)
        await server.stopped()
    }

    /// An op of each kind, with references by index or by id drawn at random, valid against `sections` (or nil).
    static func op(_ random: inout RandomHistory, on sections: [Section]) -> Op? {
        func sectionRef(_ index: Int) -> SectionRef { random.chance(50) ? .index(index) : .id(sections[index].id) }
        func itemRef(_ s: Int, _ i: Int) -> ItemRef {
            random.chance(50) ? .id(sections[s].items[i].id) : .path(sectionRef(s), i)
        }
        let data = JSONData(canonical: random.data())
        switch random.int(0...7) {
        case 0:
            return .insertSections(at: random.int(0...sections.count), sections: random.sections(1, maxItems: 2))
        case 1 where !sections.isEmpty:
            return .deleteSections([sectionRef(random.int(0...sections.count - 1))])
        case 2 where !sections.isEmpty:
            let last = sections.count - 1
            return .moveSection(sectionRef(random.int(0...last)), to: random.int(0...last))
        case 3 where !sections.isEmpty:
            return .updateSection(sectionRef(random.int(0...sections.count - 1)), data: data)
        case 4 where !sections.isEmpty:
            let s = random.int(0...sections.count - 1)
            let at = ItemPosition(section: sectionRef(s), index: random.int(0...sections[s].items.count))
            return .insertItems(at: at, items: random.items(random.int(1...2)))
        case 5:
            return random.randomItem(in: sections).map { .deleteItems([itemRef($0.0, $0.1)]) }
        case 6:
            guard let (s, i) = random.randomItem(in: sections) else { return nil }
            let t = random.int(0...sections.count - 1)
            let count = sections[t].items.count - (s == t ? 1 : 0)
            return .moveItem(itemRef(s, i), to: ItemPosition(section: sectionRef(t), index: random.int(0...count)))
        case 7:
            return random.randomItem(in: sections).map {
                .updateItems([Item(id: sections[$0.0].items[$0.1].id, data: data)])
            }
        default:
            return nil
        }
    }

    @Test func failuresAreTypedAndSayWhetherAWriteMayHaveLanded() async throws {
        let server = try await ServerProcess.started()
        let client = ChangeServerClient(baseURL: server.baseURL)
        let first = try await client.put("c", sections: [Self.section("s", ["a"])])

        /// The refusal a write met; the closure is untyped, since a closure's thrown type is not inferred.
        func refusal(_ write: () async throws -> Void) async -> ServerError? {
            do {
                try await write()
                return nil
            } catch {
                #expect((error as? WriteError)?.outcomeUnknown == false, "the server said what it did: \(error)")
                guard case .refused(let refused) = error as? WriteError else { return nil }
                return refused
            }
        }
        let rejectedOp = await refusal {
            _ = try await client.apply([.updateItems([Item(id: "a")]), .deleteItems([.id("nope")])], to: "c")
        }
        #expect(rejectedOp?.status == 409 && rejectedOp?.code == .itemNotFound && rejectedOp?.op == 1)
        #expect(rejectedOp?.message.isEmpty == false)

        let moved = try await client.upsert("b", in: "c")
        let stale = await refusal { _ = try await client.upsert("a", in: "c", if: .at(first.version)) }
        #expect(stale?.status == 412 && stale?.code == .preconditionFailed && stale?.current == moved.version)
        #expect(
            try await client.upsert("a", in: "c", data: JSONData(canonical: "1"), if: .at(moved.version)).version
                == moved.version.next)
        let exists = await refusal { _ = try await client.put("c", sections: [], if: .absent) }
        #expect(exists?.code == .preconditionFailed)
        #expect(try await client.put("new", sections: [], if: .absent).created)
        let missing = await refusal { _ = try await client.put("gone", sections: [], if: .exists) }
        #expect(missing?.status == 412)
        #expect(await refusal { _ = try await client.upsert("x", in: "gone") }?.code == .collectionNotFound)
        #expect(await refusal { _ = try await client.item("zz", in: "c") }?.code == .itemNotFound)
        #expect(await refusal { _ = try await client.deleteItem("zz", from: "c") }?.code == .itemNotFound)
        #expect(await refusal { _ = try await client.put("bad name", sections: []) }?.code == .invalidName)
        #expect(
            await refusal { _ = try await client.upsert("x", in: "c", section: .id("none")) }?.code == .sectionNotFound)
        #expect(await refusal { _ = try await client.deleteView("nope") }?.code == .viewNotFound)
        // Nothing above changed the collection but the two upserts.
        #expect(try await client.snapshot(of: "c").version == moved.version.next)
        await server.stopped()

        // No server: nothing could be sent, so nothing was written (an app may send it again as it is).
        do throws(WriteError) {
            _ = try await client.upsert("x", in: "c")
            Issue.record("a stopped server answered")
        } catch {
            guard case .unreachable = error else { throw error }
            #expect(!error.outcomeUnknown)
        }
    }

    /// Data is spliced into a body as the text it is, and `JSONData(canonical:)` takes any text: text that is not
    /// one JSON value is refused before anything is sent. Sent, it ended the value early and went on as the
    /// request's own members: an `updateItems` of one item deleted another section, an upsert's data moved it.
    @Test func dataThatIsNotOneJSONValueIsNotSent() async throws {
        let server = try await ServerProcess.started()
        let client = ChangeServerClient(baseURL: server.baseURL)
        let before = try await client.put(
            "c", sections: [Self.section("keep", ["a", "b"]), Self.section("other", [])])
        let injected = JSONData(
            canonical:
                #"1}]},{"op":"deleteSections","sections":["other"]},{"op":"updateItems","items":[{"id":"b","data":1"#)
        let moving = JSONData(canonical: #"1,"section":"other","index":0"#)
        let writes: [(String, () async throws(WriteError) -> Void)] = [
            (
                "updateItems",
                { () async throws(WriteError) in
                    _ = try await client.apply([.updateItems([Item(id: "a", data: injected)])], to: "c")
                }
            ),
            ("upsert", { () async throws(WriteError) in _ = try await client.upsert("b", in: "c", data: moving) }),
            (
                "put",
                { () async throws(WriteError) in
                    _ = try await client.put("c", sections: [Self.section("keep", [], data: "{")])
                }
            ),
            (
                "updateSection",
                { () async throws(WriteError) in
                    _ = try await client.apply([.updateSection(.index(1), data: JSONData(canonical: ""))], to: "c")
                }
            ),
        ]
        let definition: (String, () async throws(WriteError) -> Void) = (
            "defineView",
            { () async throws(WriteError) in
                _ = try await client.defineView("v", definition: JSONData(canonical: #"{"source":"c""#))
            }
        )
        for (name, write) in writes + [definition] {
            do throws(WriteError) {
                try await write()
                Issue.record("\(name): data that is not one JSON value was sent")
            } catch {
                guard case .invalidRequest(let why) = error else { throw error }
                #expect(why.contains("is not one JSON value"), "\(name): \(why)")
                #expect(!error.outcomeUnknown)
            }
        }
        #expect(try await client.snapshot(of: "c").version == before.version, "nothing was written")
        // Valid data that is not canonical is sent, and the server makes it canonical.
        let spaced = try await client.upsert("b", in: "c", data: JSONData(canonical: #" { "y" : 2 , "x" : 1 } "#))
        #expect(spaced.changes.items.updated.map(\.item.data) == [JSONData(canonical: #"{"x":1,"y":2}"#)])
        await server.stopped()
    }

    /// A base URL that is no server's, or an empty name, is refused before anything is sent, by both clients;
    /// a feed of an `ftp://` URL was retried without end as a failure.
    @Test(.timeLimit(.minutes(1))) func baseURLsThatAreNoServersAreRefused() async throws {
        for (text, why) in [
            ("ftp://127.0.0.1:1", "not an http:// or https:// URL"), ("http://127.0.0.1:1/?x=1", "no query"),
            ("http://127.0.0.1:1/#top", "no query or fragment"), ("file:///tmp", "not an http"),
        ] {
            let url = try #require(URL(string: text))
            do throws(WriteError) {
                _ = try await ChangeServerClient(baseURL: url).upsert("x", in: "c")
                Issue.record("\(text) was taken")
            } catch {
                guard case .invalidURL(let problem) = error else { throw error }
                #expect(problem.contains(why), "\(text): \(problem)")
            }
            var events = FeedClient(baseURL: url, name: "c").events().makeAsyncIterator()
            do throws(FeedError) {
                _ = try await events.next()
                Issue.record("a feed of \(text) went on")
            } catch {
                guard case .invalidURL(let problem) = error else { throw error }
                #expect(problem.contains(why), "\(text): \(problem)")
            }
        }
        var events = FeedClient(baseURL: try #require(URL(string: "http://127.0.0.1:1")), name: "").events()
            .makeAsyncIterator()
        do throws(FeedError) {
            _ = try await events.next()
            Issue.record("a feed of no name went on")
        } catch {
            #expect(error == .invalidURL("http://127.0.0.1:1: the collection's name is empty"))
        }
    }

    @Test func tokensAndCancellation() async throws {
        let server = try await ServerProcess.started(["--write-token", "w"])
        let anonymous = ChangeServerClient(baseURL: server.baseURL)
        do throws(WriteError) {
            _ = try await anonymous.put("c", sections: [])
            Issue.record("a write without the token was taken")
        } catch {
            #expect(error.code == .unauthorized)
        }
        let client = ChangeServerClient(baseURL: server.baseURL, token: "w")
        #expect(try await client.put("c", sections: []).created)
        let task = Task { () async -> WriteError? in
            withUnsafeCurrentTask { $0?.cancel() }
            do throws(WriteError) {
                _ = try await client.upsert("x", in: "c")
                return nil
            } catch {
                return error
            }
        }
        let error = await task.value
        #expect(error == .cancelled(sent: false) && error?.outcomeUnknown == false, "\(String(describing: error))")
        #expect(try await client.snapshot(of: "c").sections.isEmpty, "a task cancelled first sends nothing")

        // A token a header cannot carry is refused before anything is sent: with a line break it added headers of
        // its own to the request (or a request of its own), by both clients.
        for token in ["w\r\nX-Injected: yes", "w\n", "w\0", " w", "w\t"] {
            do throws(WriteError) {
                _ = try await ChangeServerClient(baseURL: server.baseURL, token: token).upsert("x", in: "c")
                Issue.record("the token \(token.debugDescription) was sent")
            } catch {
                guard case .invalidRequest = error else { throw error }
                #expect(!error.outcomeUnknown)
            }
            var events = FeedClient(baseURL: server.baseURL, name: "c", token: token).events().makeAsyncIterator()
            do throws(FeedError) {
                _ = try await events.next()
                Issue.record("a feed sent the token \(token.debugDescription)")
            } catch {
                guard case .invalidRequest = error else { throw error }
            }
        }
        #expect(try await client.snapshot(of: "c").sections.isEmpty)
        await server.stopped()
    }

    /// Views are defined and deleted through the client, and read as snapshots and by item.
    @Test func views() async throws {
        let server = try await ServerProcess.started()
        let client = ChangeServerClient(baseURL: server.baseURL)
        _ = try await client.put("scores", sections: [Section(id: "all")])
        for (id, score) in [("ann", 3), ("bob", 7), ("cy", 5)] {
            _ = try await client.upsert(id, in: "scores", data: try JSONData(encoding: Score(score: score)))
        }
        let definition = JSONData(
            canonical: #"{"limit":2,"sortBy":[{"field":"/score","order":"desc"}],"source":"scores"}"#)
        let defined = try await client.defineView("top", definition: definition, if: .absent)
        #expect(
            defined.created && defined.changes.sections.inserted.flatMap(\.section.items).map(\.id) == ["bob", "cy"])
        let top = try await client.snapshot(of: "top", kind: .view)
        #expect(top.sections.flatMap(\.items).map(\.id) == ["bob", "cy"])
        #expect(try top.sections[0].items[0].data.decoded(as: Score.self) == Score(score: 7))
        // A player's rank, read alone; one the view leaves out is not found there.
        #expect(try await client.item("cy", in: "top", kind: .view).at == ItemPath(section: 0, item: 1))
        do throws(WriteError) {
            _ = try await client.item("ann", in: "top", kind: .view)
            Issue.record("an item the view leaves out was read from it")
        } catch {
            #expect(error.code == .itemNotFound)
        }
        do throws(WriteError) {
            _ = try await client.defineView("top", definition: JSONData(canonical: #"{"source":"scores","nope":1}"#))
            Issue.record("an invalid definition was taken")
        } catch {
            #expect(error.code == .invalidView)
        }
        try await client.deleteView("top")
        do throws(WriteError) {
            _ = try await client.snapshot(of: "top", kind: .view)
            Issue.record("a deleted view was read")
        } catch {
            #expect(error.code == .viewNotFound)
        }
        await server.stopped()
    }

    struct Score: Codable, Equatable {
        var score: Int
    }

    /// An app's own values go in and come out as data, canonical as the server keeps it.
    @Test func codableData() throws {
        struct Message: Codable, Equatable {
            var text: String
            var at: Int
            var tags: [String]
        }
        let message = Message(text: "hé \"there\"\n", at: 3, tags: ["b", "a"])
        let data = try JSONData(encoding: message)
        #expect(data.description == #"{"at":3,"tags":["b","a"],"text":"hé \"there\"\n"}"#)
        #expect(try data.decoded(as: Message.self) == message)
        #expect(throws: DecodingError.self) { try JSONData.null.decoded(as: Message.self) }
    }

    /// The client names every code of the README's error table, so that an app matches codes by name.
    @Test func theClientNamesEveryDocumentedErrorCode() throws {
        let readme = try String(contentsOf: Repository.root.appendingPathComponent("README.md"), encoding: .utf8)
        let table = readme.components(separatedBy: "\n## Errors\n")[1].components(separatedBy: "\n## ")[0]
        var documented: [String] = []
        for line in table.split(separator: "\n") where line.hasPrefix("| 4") || line.hasPrefix("| 5") {
            let codes = line.split(separator: "|")[1]
            documented += codes.split(separator: "`").enumerated().filter { $0.offset % 2 == 1 }.map {
                String($0.element)
            }
        }
        #expect(documented.count > 25)
        #expect(Set(documented) == Set(ErrorCode.catalogue.map(\.rawValue)))
        #expect(ErrorCode.catalogue.count == Set(ErrorCode.catalogue).count)
    }
}
