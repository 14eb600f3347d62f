/// What a view shows: the items of its source collection (from all its sections) that pass `filter`, grouped
/// into sections by `sectionBy`, sorted by `sortBy` (ties broken by item id, bytewise ascending), cut to the
/// first `limit` of the whole view. See the Views section of API.md.
///
/// Values are valid by construction: every initializer checks what API.md requires and throws
/// `ViewDefinitionError` naming the bad part.
public struct ViewDefinition: Sendable, Equatable {
    /// The source collection's name.
    public let source: String
    /// Which items are shown; nil shows every item.
    public let filter: ViewFilter?
    /// The key that groups items into sections; nil gives one section, `"all"`, with null data.
    public let sectionBy: ViewKey?
    /// Sort keys within a section, applied in turn.
    public let sortBy: [ViewKey]
    /// At most this many items are shown, the first of the whole view; at least 1.
    public let limit: Int?

    /// Filters may nest at most this deep (a leaf alone is depth 1, each combinator adds one).
    public static let maximumDepth = 16
    /// Filters may hold at most this many leaves.
    public static let maximumLeaves = 256
    /// A definition a server takes now holds at most this many `sortBy` keys (`checkNewDefinition`). Not checked by
    /// the initializers: a definition taken before the bound is still read from a journal as it was.
    public static let maximumSortKeys = 16
    /// A definition a server takes now holds at most this many values in all its `in` lists together
    /// (`checkNewDefinition`), as it bounds its leaves; a definition taken before the bound is still read as it was.
    public static let maximumListValues = 10_000

    /// The rules a server applies to a definition it is asked for now, beyond those every definition read obeys, so
    /// that a definition journaled before a rule is still read as it was. Throws for more than `maximumSortKeys`
    /// keys in `sortBy` (each one costs every item of the view a look-up and a comparison, so that a long list would
    /// hold up the source's writes while the view is built), a `sortBy` field named twice (the second orders
    /// nothing, and the view's index holds each key's value for every item: sixteen keys of a whole item's data,
    /// `""`, held sixteen copies of the source), more than `maximumListValues` values in the filter's
    /// `in` lists (each is stored, listed and built into the view's rules with the definition), or an `lt`, `le`,
    /// `gt` or `ge` whose operand is neither a number nor a string: such a test holds for no item (see `ViewTest`),
    /// so it is a mistake, and under `not` it would let every item through.
    public func checkNewDefinition() throws(ViewDefinitionError) {
        guard sortBy.count <= ViewDefinition.maximumSortKeys else {
            throw ViewDefinitionError(
                part: "sortBy", reason: "\(sortBy.count) keys, more than \(ViewDefinition.maximumSortKeys)")
        }
        for (index, key) in sortBy.enumerated() {
            if let first = sortBy[..<index].firstIndex(where: { $0.field.tokens == key.field.tokens }) {
                throw ViewDefinitionError(
                    part: "sortBy[\(index)].field",
                    reason: "repeats sortBy[\(first)]'s field \(key.field.text.quotedAsJSON): items it ties are equal "
                        + "there too, so it orders nothing, and each key holds a copy of its value for every item")
            }
        }
        let values = filter?.listValueCount ?? 0
        guard values <= ViewDefinition.maximumListValues else {
            throw ViewDefinitionError(
                part: "filter",
                reason: "\(values) values in its in lists, more than \(ViewDefinition.maximumListValues)")
        }
        try filter?.checkOrderedOperands(part: "filter")
    }

    /// - Throws: `ViewDefinitionError` for an invalid source name, a filter nested too deeply or with too many
    ///   leaves, or a limit below 1.
    /// - Complexity: O(size of the filter).
    public init(
        source: String, filter: ViewFilter? = nil, sectionBy: ViewKey? = nil, sortBy: [ViewKey] = [],
        limit: Int? = nil
    ) throws(ViewDefinitionError) {
        guard ViewDefinition.isValidName(source) else {
            throw ViewDefinitionError(part: "source", reason: "not a collection name: \(source.quotedAsJSON)")
        }
        if let filter {
            try filter.checkShape(part: "filter", depth: 1)
            let leaves = filter.leafCount
            guard leaves <= ViewDefinition.maximumLeaves else {
                throw ViewDefinitionError(
                    part: "filter", reason: "\(leaves) leaves, more than \(ViewDefinition.maximumLeaves)")
            }
        }
        if let limit, limit < 1 {
            throw ViewDefinitionError(part: "limit", reason: "must be at least 1, got \(limit)")
        }
        self.source = source
        self.filter = filter
        self.sectionBy = sectionBy
        self.sortBy = sortBy
        self.limit = limit
    }

    /// Collection and view names: `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`.
    public static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard let first = bytes.first, bytes.count <= 128, isAlphanumeric(first) else { return false }
        return bytes.allSatisfy {
            isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-")
        }
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default: false
        }
    }
}

/// A field to group or sort by, and its direction.
public struct ViewKey: Sendable, Equatable {
    /// Where the key is in an item's data.
    public var field: JSONPointer
    /// Whether the order is descending.
    public var descending: Bool

    /// A key at `field`, ascending unless `descending`.
    public init(field: JSONPointer, descending: Bool = false) {
        self.field = field
        self.descending = descending
    }
}

/// A predicate on an item's data: leaves test one field; `all`, `any` and `not` combine them.
public indirect enum ViewFilter: Sendable, Equatable {
    /// Holds when every filter holds (and for none).
    case all([ViewFilter])
    /// Holds when some filter holds.
    case any([ViewFilter])
    /// Holds when the filter does not.
    case not(ViewFilter)
    /// Tests the value at `field`.
    case leaf(field: JSONPointer, ViewTest)

    var leafCount: Int {
        switch self {
        case .all(let filters), .any(let filters): filters.reduce(0) { $0 + $1.leafCount }
        case .not(let filter): filter.leafCount
        case .leaf: 1
        }
    }

    /// Values in all the `in` lists of the filter.
    var listValueCount: Int {
        switch self {
        case .all(let filters), .any(let filters): filters.reduce(0) { $0 + $1.listValueCount }
        case .not(let filter): filter.listValueCount
        case .leaf(_, .in(let values)): values.count
        case .leaf: 0
        }
    }

    /// Throws for the first `lt`, `le`, `gt` or `ge` whose operand is neither a number nor a string, naming it as the
    /// wire form does (`filter.all[1].lt`).
    func checkOrderedOperands(part: String) throws(ViewDefinitionError) {
        switch self {
        case .all(let filters):
            for (index, filter) in filters.enumerated() {
                try filter.checkOrderedOperands(part: "\(part).all[\(index)]")
            }
        case .any(let filters):
            for (index, filter) in filters.enumerated() {
                try filter.checkOrderedOperands(part: "\(part).any[\(index)]")
            }
        case .not(let filter):
            try filter.checkOrderedOperands(part: "\(part).not")
        case .leaf(_, let test):
            switch test {
            case .lt(let operand), .le(let operand), .gt(let operand), .ge(let operand):
                let found: String
                switch operand {
                case .number, .string: return
                case .null: found = "null"
                case .bool: found = "a boolean"
                case .array: found = "an array"
                case .object: found = "an object"
                }
                throw ViewDefinitionError(
                    part: "\(part).\(test.name)",
                    reason: "must be a number or a string (it holds for no item against \(found))")
            default: return
            }
        }
    }

    /// Throws for nesting deeper than `ViewDefinition.maximumDepth`, naming the first part too deep.
    func checkShape(part: String, depth: Int) throws(ViewDefinitionError) {
        guard depth <= ViewDefinition.maximumDepth else {
            throw ViewDefinitionError(part: part, reason: "nested deeper than \(ViewDefinition.maximumDepth)")
        }
        switch self {
        case .all(let filters):
            for (index, filter) in filters.enumerated() {
                try filter.checkShape(part: "\(part).all[\(index)]", depth: depth + 1)
            }
        case .any(let filters):
            for (index, filter) in filters.enumerated() {
                try filter.checkShape(part: "\(part).any[\(index)]", depth: depth + 1)
            }
        case .not(let filter):
            try filter.checkShape(part: "\(part).not", depth: depth + 1)
        case .leaf:
            break
        }
    }
}

/// The test of a filter leaf on its field. `eq`, `ne` and `in` compare by data equality (a missing field is
/// `null`); `lt`, `le`, `gt`, `ge` hold only when both sides are numbers (by value) or both strings (bytewise);
/// `prefix` only for strings; a missing field fails every test but `eq`, `ne`, `in` and `exists: false`.
public enum ViewTest: Sendable, Equatable {
    /// Equal to the value.
    case eq(JSON)
    /// Not equal to the value.
    case ne(JSON)
    /// Less than the value.
    case lt(JSON)
    /// Less than or equal to the value.
    case le(JSON)
    /// Greater than the value.
    case gt(JSON)
    /// Greater than or equal to the value.
    case ge(JSON)
    /// Equal to one of the values.
    case `in`([JSON])
    /// The field is there (`true`) or missing (`false`).
    case exists(Bool)
    /// A string starting with this one.
    case prefix(String)

    /// The op's name in the wire form.
    public var name: String {
        switch self {
        case .eq: "eq"
        case .ne: "ne"
        case .lt: "lt"
        case .le: "le"
        case .gt: "gt"
        case .ge: "ge"
        case .in: "in"
        case .exists: "exists"
        case .prefix: "prefix"
        }
    }

    /// The operand in the wire form.
    public var operand: JSON {
        switch self {
        case .eq(let value), .ne(let value), .lt(let value), .le(let value), .gt(let value), .ge(let value): value
        case .in(let values): .array(values)
        case .exists(let value): .bool(value)
        case .prefix(let value): .string(value)
        }
    }

    /// Tests are equal when their ops and operands are, operands by their bytes (`JSON ==`).
    public static func == (lhs: ViewTest, rhs: ViewTest) -> Bool {
        lhs.name == rhs.name && lhs.operand == rhs.operand
    }
}

/// Why a view definition is invalid (HTTP 400, code `invalid_view`): the part, as a path such as
/// `filter.all[2]`, and what is wrong with it.
public struct ViewDefinitionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The error code of the HTTP answer.
    public static let code = "invalid_view"

    /// The part of the definition that is wrong.
    public var part: String
    /// Why it is wrong.
    public var reason: String

    /// An error naming `part` and why.
    public init(part: String, reason: String) {
        self.part = part
        self.reason = reason
    }

    /// `"<part>: <reason>"`, or the reason alone for the whole definition.
    public var message: String { part.isEmpty ? reason : "\(part): \(reason)" }
    /// The message for people.
    public var description: String { message }
}
