/// An item of a section: an id unique in its whole collection, and opaque data.
public struct Item: Hashable, Sendable {
    /// Unique in the whole collection: 1 to 256 UTF-8 bytes, no NUL.
    public var id: String
    /// The item's payload, as canonical JSON.
    public var data: JSONData

    /// An item; its data defaults to `null`.
    public init(id: String, data: JSONData = .null) {
        self.id = id
        self.data = data
    }

    /// Ids compare byte for byte (`ExactString`), as the contract compares them.
    public static func == (lhs: Item, rhs: Item) -> Bool {
        lhs.id.hasSameBytes(as: rhs.id) && lhs.data == rhs.data
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ExactString(id))
        hasher.combine(data)
    }
}

/// A section with its items, as a plain value: what requests carry in and snapshots give out.
public struct Section: Hashable, Sendable {
    /// Unique among the collection's sections: 1 to 256 UTF-8 bytes, no NUL.
    public var id: String
    /// The section's own payload (a header's, say), as canonical JSON.
    public var data: JSONData
    /// The items, in order.
    public var items: [Item]

    /// A section; its data defaults to `null` and its items to none.
    public init(id: String, data: JSONData = .null, items: [Item] = []) {
        self.id = id
        self.data = data
        self.items = items
    }

    /// Ids compare byte for byte (`ExactString`), as the contract compares them.
    public static func == (lhs: Section, rhs: Section) -> Bool {
        lhs.id.hasSameBytes(as: rhs.id) && lhs.data == rhs.data && lhs.items == rhs.items
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ExactString(id))
        hasher.combine(data)
        hasher.combine(items)
    }
}

/// An item's place, as UIKit's `IndexPath` holds it: a section index and an item index within it. Named apart
/// from Foundation's `IndexPath` so that code importing both never has to qualify either.
public struct ItemPath: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The section's index.
    public var section: Int
    /// The item's index within its section.
    public var item: Int

    /// The place of item `item` of section `section`.
    public init(section: Int, item: Int) {
        self.section = section
        self.item = item
    }

    /// Section first, then item: the order of the changeset arrays.
    public static func < (lhs: ItemPath, rhs: ItemPath) -> Bool {
        (lhs.section, lhs.item) < (rhs.section, rhs.item)
    }

    /// `[section, item]`, as on the wire.
    public var description: String { "[\(section), \(item)]" }
}

/// Ids are non-empty strings of at most this many UTF-8 bytes.
package let maximumIDByteCount = 256
