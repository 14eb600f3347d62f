import Model
import Testing

@testable import ChangeServer

/// The registry's arrangement of each source's views for its writes (`ViewRegistry.dispatch`) follows every change
/// of the views: one made before a change is never used after it.
@Suite struct InProcessViewRegistryTests {
    private func definition(_ source: String, owner: String) throws -> ViewDefinition {
        try ViewDefinition(
            json: Array(#"{"source": "\#(source)", "filter": {"field": "/owner", "eq": "\#(owner)"}}"#.utf8))
    }

    private func entry(_ name: String, _ definition: ViewDefinition) -> ViewEntry {
        ViewEntry(name: name, live: LiveView(epoch: "e", definition: definition, source: nil))
    }

    private func names(_ registry: ViewRegistry, _ source: String) -> [String] {
        registry.dispatch(of: source).targets.map(\.name)
    }

    @Test func aDispatchFollowsInsertionsRedefinitionsAndRemovals() throws {
        let registry = ViewRegistry()
        #expect(names(registry, "a").isEmpty)
        let v1 = entry("v1", try definition("a", owner: "u1"))
        registry.insert(v1, definition: try definition("a", owner: "u1"))
        registry.insert(entry("w", try definition("b", owner: "u9")), definition: try definition("b", owner: "u9"))
        #expect(names(registry, "a") == ["v1"] && names(registry, "b") == ["w"])
        // Onto a source whose dispatch was made: it is made again, with the view.
        registry.redefined("v1", from: "a", to: try definition("b", owner: "u1"))
        #expect(names(registry, "a").isEmpty && names(registry, "b") == ["v1", "w"])
        registry.remove(v1, source: "b")
        #expect(names(registry, "b") == ["w"])
    }

    /// A view redefined onto a source that has views, whose dispatch was made by a write, gets the writes to its
    /// values there.
    @Test func aViewMovedOntoASourceWithViewsFollowsItsWrites() throws {
        let server = try InProcessServer()
        for source in ["a", "b"] {
            let body = #"{"sections": [{"id": "s", "items": []}]}"#
            #expect(server.send("PUT", "/v1/collections/\(source)", body: body).status == 201)
        }
        func define(_ view: String, _ source: String, _ owner: String) {
            let body = #"{"source": "\#(source)", "filter": {"field": "/owner", "eq": "\#(owner)"}}"#
            #expect((200...201).contains(server.send("PUT", "/v1/views/\(view)", body: body).status))
        }
        define("v1", "a", "u1")
        define("w", "b", "u9")
        #expect(server.send("PUT", "/v1/collections/b/items/x", body: #"{"data": {"owner": "u9"}}"#).status == 201)
        define("v1", "b", "u1")
        #expect(server.send("PUT", "/v1/collections/b/items/y", body: #"{"data": {"owner": "u1"}}"#).status == 201)
        let shown = server.send("GET", "/v1/views/v1").json["sections"] as? [[String: Any]] ?? []
        #expect(shown.flatMap { ($0["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String } } == ["y"])
    }
}
