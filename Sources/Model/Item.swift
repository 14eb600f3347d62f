/// An item of a section: an id unique in its whole collection, and opaque data.
public struct Item: Hashable, Sendable {
    public var id: String
    public var data: JSONData

    public init(id: String, data: JSONData = .null) {
        self.id = id
        self.data = data
    }
}

/// A section with its items, as a plain value: what requests carry in and snapshots give out.
public struct Section: Hashable, Sendable {
    public var id: String
    public var data: JSONData
    public var items: [Item]

    public init(id: String, data: JSONData = .null, items: [Item] = []) {
        self.id = id
        self.data = data
        self.items = items
    }
}

/// An index path as UIKit's `IndexPath`: a section index and an item index within it.
public struct IndexPath: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var section: Int
    public var item: Int

    public init(section: Int, item: Int) {
        self.section = section
        self.item = item
    }

    public static func < (lhs: IndexPath, rhs: IndexPath) -> Bool {
        (lhs.section, lhs.item) < (rhs.section, rhs.item)
    }

    public var description: String { "[\(section), \(item)]" }
}

/// Ids are non-empty strings of at most this many UTF-8 bytes.
public let maximumIDByteCount = 256
