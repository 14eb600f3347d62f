/// A definition compiled for evaluating item data in place: the filter with its operands prepared (canonical
/// texts for equality, values for comparisons), and the keys that place an item in the view.
struct ViewRules: Sendable {
    /// Where an item that passes the filter goes: its order key (section key, sort keys, then its id: the whole
    /// position in the view as one byte string), how many leading bytes of it are the section key, and the
    /// section's id (the key's canonical text; `"all"` without `sectionBy`).
    struct Placement: Sendable, Equatable {
        var key: [UInt8]
        var sectionLength: Int
        var section: String

        var sectionKey: [UInt8] { Array(key[..<sectionLength]) }
    }

    private indirect enum Node: Sendable {
        case all([Node])
        case any([Node])
        case not(Node)
        case leaf(JSONPointer, Check)
    }

    private enum Comparison: Sendable {
        case lt, le, gt, ge

        /// Whether `lhs` stands in this relation to `rhs`, given whether it is less and whether it is equal.
        func holds(less: Bool, equal: Bool) -> Bool {
            switch self {
            case .lt: less
            case .le: less || equal
            case .gt: !less && !equal
            case .ge: !less
            }
        }
    }

    private enum Check: Sendable {
        /// Data equality with one of the texts (`eq`, `in`), or with none of them (`ne`).
        case equal([[UInt8]], negated: Bool)
        case number(Double, Comparison)
        case string([UInt8], Comparison)
        case exists(Bool)
        case prefix([UInt8])
        /// A comparison with an operand that is neither a number nor a string: it never holds.
        case never
    }

    /// The section id of the view without `sectionBy`.
    static let allSection = "all"

    private let filter: Node?
    let sectionBy: ViewKey?
    let sortBy: [ViewKey]
    /// The limit, `Int.max` when there is none.
    let limit: Int

    init(_ definition: ViewDefinition) {
        filter = definition.filter.map(ViewRules.compile)
        sectionBy = definition.sectionBy
        sortBy = definition.sortBy
        limit = definition.limit ?? Int.max
    }

    /// The data of a section with this id: `{"key": <the key>}`, or null without `sectionBy`.
    func sectionData(_ id: String) -> JSONData {
        guard sectionBy != nil else { return .null }
        return JSONData(canonical: Array("{\"key\":".utf8) + Array(id.utf8) + [UInt8(ascii: "}")])
    }

    /// Where the item goes, or nil when it is not shown: it fails the filter, or its section key's canonical
    /// text is longer than a section id may be (`maximumIDByteCount` bytes).
    /// - Complexity: O(size of the data) per pointer, at most.
    func placement(id: String, data: JSONData) -> Placement? {
        data.bytes.withUnsafeBufferPointer { placement(id: id, bytes: $0) }
    }

    private func placement(id: String, bytes: UnsafeBufferPointer<UInt8>) -> Placement? {
        if let filter, !ViewRules.holds(filter, bytes) { return nil }
        var key: [UInt8] = []
        key.reserveCapacity(24 + 16 * sortBy.count + id.utf8.count)
        var section = ViewRules.allSection
        if let sectionBy {
            let range = sectionBy.field.locate(in: bytes)
            section = range.map { String(decoding: UnsafeBufferPointer(rebasing: bytes[$0]), as: UTF8.self) } ?? "null"
            guard section.utf8.count <= maximumIDByteCount else { return nil }
            OrderKey.append(range, of: bytes, descending: sectionBy.descending, to: &key)
        }
        let sectionLength = key.count
        for sort in sortBy {
            OrderKey.append(sort.field.locate(in: bytes), of: bytes, descending: sort.descending, to: &key)
        }
        key.append(contentsOf: id.utf8)
        return Placement(key: key, sectionLength: sectionLength, section: section)
    }

    private static func holds(_ node: Node, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        switch node {
        case .all(let nodes): return nodes.allSatisfy { holds($0, bytes) }
        case .any(let nodes): return nodes.contains { holds($0, bytes) }
        case .not(let node): return !holds(node, bytes)
        case .leaf(let pointer, let check): return test(check, pointer.locate(in: bytes), bytes)
        }
    }

    private static func test(_ check: Check, _ range: Range<Int>?, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        switch check {
        case .equal(let texts, let negated):
            guard let range else { return texts.contains(ViewRules.null) != negated }
            let value = UnsafeBufferPointer(rebasing: bytes[range])
            return texts.contains { CanonicalScanner.equal(value, $0) } != negated
        case .exists(let wanted):
            return (range != nil) == wanted
        case .never:
            return false
        case .number(let operand, let comparison):
            guard let range, let first = range.first.map({ bytes[$0] }), first == UInt8(ascii: "-") || isDigit(first)
            else { return false }
            let value = OrderKey.numericValue(bytes[range])
            return comparison.holds(less: value < operand, equal: value == operand)
        case .string(let operand, let comparison):
            guard let range, bytes[range.lowerBound] == UInt8(ascii: "\"") else { return false }
            let value = CanonicalScanner(bytes: bytes).decodeString(range)
            return comparison.holds(less: value.lexicographicallyPrecedes(operand), equal: value == operand)
        case .prefix(let prefix):
            guard let range, bytes[range.lowerBound] == UInt8(ascii: "\"") else { return false }
            let text = CanonicalScanner(bytes: bytes).decodeString(range)
            return text.count >= prefix.count && text[..<prefix.count].elementsEqual(prefix)
        }
    }

    private static let null = Array("null".utf8)

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private static func compile(_ filter: ViewFilter) -> Node {
        switch filter {
        case .all(let filters): .all(filters.map(compile))
        case .any(let filters): .any(filters.map(compile))
        case .not(let filter): .not(compile(filter))
        case .leaf(let field, let test): .leaf(field, compile(test))
        }
    }

    private static func compile(_ test: ViewTest) -> Check {
        switch test {
        case .eq(let value): .equal([value.canonicalText], negated: false)
        case .ne(let value): .equal([value.canonicalText], negated: true)
        case .in(let values): .equal(values.map(\.canonicalText), negated: false)
        case .exists(let wanted): .exists(wanted)
        case .prefix(let prefix): .prefix(Array(prefix.utf8))
        case .lt(let value): comparison(value, .lt)
        case .le(let value): comparison(value, .le)
        case .gt(let value): comparison(value, .gt)
        case .ge(let value): comparison(value, .ge)
        }
    }

    private static func comparison(_ operand: JSON, _ comparison: Comparison) -> Check {
        switch operand {
        case .number(let text): .number(OrderKey.numericValue(text.utf8), comparison)
        case .string(let text): .string(Array(text.utf8), comparison)
        default: .never
        }
    }
}
