import Foundation

/// What a client of the change feed keeps of a collection with one section: its items (id and data as JSON
/// text) at `version`, moved forward by applying each changeset as UIKit would (deletes and move sources at
/// indices before the batch, inserts and move destinations after it, then updates after it).
struct ItemMirror: Equatable {
    var version: String
    var items: [(id: String, data: String)]

    static func == (lhs: ItemMirror, rhs: ItemMirror) -> Bool {
        lhs.version == rhs.version && lhs.items.map(\.id) == rhs.items.map(\.id)
            && lhs.items.map(\.data) == rhs.items.map(\.data)
    }

    /// The mirror of a `GET /v1/collections/{name}` answer.
    init(snapshot: [String: Any]) {
        version = snapshot["version"] as? String ?? ""
        let section = (snapshot["sections"] as? [[String: Any]])?.first
        items = ((section?["items"] as? [[String: Any]]) ?? []).map {
            ($0["id"] as? String ?? "", Self.text($0["data"]))
        }
    }

    /// Applies a poll answer (`{"from", "to", "changes"}`); false when it does not start at this version.
    mutating func apply(poll: [String: Any]) -> Bool {
        guard poll["from"] as? String == version, let to = poll["to"] as? String else { return false }
        let changes = (poll["changes"] as? [String: Any])?["items"] as? [String: [[String: Any]]] ?? [:]
        func index(_ path: Any?) -> Int { (path as? [Int])?.last ?? -1 }
        var removed = Set<Int>()
        for entry in changes["deleted"] ?? [] { removed.insert(index(entry["at"])) }
        var placed: [Int: (id: String, data: String)] = [:]
        for entry in changes["moved"] ?? [] {
            let from = index(entry["from"])
            removed.insert(from)
            guard items.indices.contains(from) else { return false }
            placed[index(entry["to"])] = items[from]
        }
        for entry in changes["inserted"] ?? [] {
            placed[index(entry["at"])] = (entry["id"] as? String ?? "", Self.text(entry["data"]))
        }
        var survivors = items.enumerated().filter { !removed.contains($0.offset) }.map(\.element)[...]
        var result: [(id: String, data: String)] = []
        while !survivors.isEmpty || result.count < items.count - removed.count + placed.count {
            if let next = placed[result.count] {
                result.append(next)
            } else if let next = survivors.popFirst() {
                result.append(next)
            } else {
                return false
            }
        }
        for entry in changes["updated"] ?? [] {
            let at = index(entry["at"])
            guard result.indices.contains(at) else { return false }
            result[at].data = Self.text(entry["data"])
        }
        items = result
        version = to
        return true
    }

    /// JSON data as canonical text (sorted keys), so that equal values compare equal.
    static func text(_ value: Any?) -> String {
        guard let value, !(value is NSNull) else { return "null" }
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys])
        else { return "?" }
        return String(decoding: data, as: UTF8.self)
    }
}
