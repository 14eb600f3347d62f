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
        /// A test of field `fields[field]`.
        case leaf(field: Int, Check)
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
        /// Data equality with one of many texts (a long `in`), looked up by hash: a scan of the list for every item
        /// made a list of a million values hold the source's writes up for 40 s while the view was built.
        case member(Set<[UInt8]>)
        /// Against a number's text, read once as a `NumberOrder`, compared by value.
        case number([UInt8], NumberOrder, Comparison)
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
    /// The distinct pointers the definition reads (filter leaves, then `sectionBy`, then `sortBy`), located once
    /// per item; `sectionField` and `sortFields` are positions in it.
    private let fields: [JSONPointer]
    private let sectionField: Int?
    private let sortFields: [Int]
    /// The single tokens of `fields` when every one is a single token, so that one pass over an object's
    /// members finds them all; nil otherwise.
    private let memberTokens: [[UInt8]]?

    init(_ definition: ViewDefinition) {
        var fields: [JSONPointer] = []
        func field(_ pointer: JSONPointer) -> Int {
            if let position = fields.firstIndex(of: pointer) { return position }
            fields.append(pointer)
            return fields.count - 1
        }
        filter = definition.filter.map { ViewRules.compile($0, field) }
        sectionBy = definition.sectionBy
        sortBy = definition.sortBy
        limit = definition.limit ?? Int.max
        sectionField = definition.sectionBy.map { field($0.field) }
        sortFields = definition.sortBy.map { field($0.field) }
        self.fields = fields
        memberTokens = fields.allSatisfy { $0.tokens.count == 1 } ? fields.map { $0.tokens[0] } : nil
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
        withUnsafeTemporaryAllocation(of: Range<Int>?.self, capacity: fields.count) { ranges in
            locateFields(in: bytes, into: ranges)
            return placement(id: id, bytes: bytes, ranges: UnsafeBufferPointer(ranges))
        }
    }

    /// Sets `ranges[k]` to where `fields[k]` is in the data, or nil: all in one pass over the members when every
    /// field is a member of the top level and the data is an object.
    private func locateFields(
        in bytes: UnsafeBufferPointer<UInt8>, into ranges: UnsafeMutableBufferPointer<Range<Int>?>
    ) {
        if let memberTokens {
            var scanner = CanonicalScanner(bytes: bytes)
            scanner.skipSpace()
            if scanner.locateMembers(memberTokens, into: ranges) { return }
        }
        for (k, field) in fields.enumerated() { ranges[k] = field.locate(in: bytes) }
    }

    private func placement(id: String, bytes: UnsafeBufferPointer<UInt8>, ranges: UnsafeBufferPointer<Range<Int>?>)
        -> Placement?
    {
        if let filter, !ViewRules.holds(filter, bytes, ranges) { return nil }
        var key: [UInt8] = []
        key.reserveCapacity(24 + 16 * sortBy.count + id.utf8.count)
        var section = ViewRules.allSection
        if let sectionBy, let sectionField {
            let range = ranges[sectionField]
            section = range.map { String(decoding: UnsafeBufferPointer(rebasing: bytes[$0]), as: UTF8.self) } ?? "null"
            guard section.utf8.count <= maximumIDByteCount else { return nil }
            OrderKey.append(range, of: bytes, descending: sectionBy.descending, to: &key)
        }
        let sectionLength = key.count
        for (sort, field) in zip(sortBy, sortFields) {
            // Equal values tie here, whatever their text, and the id after them breaks the tie (API.md).
            OrderKey.append(ranges[field], of: bytes, descending: sort.descending, byText: false, to: &key)
        }
        key.append(contentsOf: id.utf8)
        return Placement(key: key, sectionLength: sectionLength, section: section)
    }

    private static func holds(
        _ node: Node, _ bytes: UnsafeBufferPointer<UInt8>, _ ranges: UnsafeBufferPointer<Range<Int>?>
    ) -> Bool {
        switch node {
        case .all(let nodes): return nodes.allSatisfy { holds($0, bytes, ranges) }
        case .any(let nodes): return nodes.contains { holds($0, bytes, ranges) }
        case .not(let node): return !holds(node, bytes, ranges)
        case .leaf(let field, let check): return test(check, ranges[field], bytes)
        }
    }

    private static func test(_ check: Check, _ range: Range<Int>?, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        switch check {
        case .equal(let texts, let negated):
            guard let range else { return texts.contains(ViewRules.null) != negated }
            let value = UnsafeBufferPointer(rebasing: bytes[range])
            return texts.contains { CanonicalScanner.equal(value, $0) } != negated
        case .member(let texts):
            guard let range else { return texts.contains(ViewRules.null) }
            return texts.contains(Array(bytes[range]))
        case .exists(let wanted):
            return (range != nil) == wanted
        case .never:
            return false
        case .number(let operand, let operandOrder, let comparison):
            guard let range, let first = range.first.map({ bytes[$0] }), first == UInt8(ascii: "-") || isDigit(first)
            else { return false }
            let order = operand.withUnsafeBufferPointer { operand in
                NumberOrder.compare(NumberOrder(bytes, range), in: bytes, operandOrder, in: operand)
            }
            return comparison.holds(less: order < 0, equal: order == 0)
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

    private static func compile(_ filter: ViewFilter, _ field: (JSONPointer) -> Int) -> Node {
        switch filter {
        case .all(let filters): .all(filters.map { compile($0, field) })
        case .any(let filters): .any(filters.map { compile($0, field) })
        case .not(let filter): .not(compile(filter, field))
        case .leaf(let pointer, let test): .leaf(field: field(pointer), compile(test))
        }
    }

    private static func compile(_ test: ViewTest) -> Check {
        switch test {
        case .eq(let value): .equal([value.canonicalText], negated: false)
        case .ne(let value): .equal([value.canonicalText], negated: true)
        case .in(let values) where values.count > 8: .member(Set(values.map(\.canonicalText)))
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
        case .number(let text):
            let operand = Array(text.utf8)
            return .number(operand, operand.withUnsafeBufferPointer { NumberOrder($0, 0..<$0.count) }, comparison)
        case .string(let text): return .string(Array(text.utf8), comparison)
        default: return .never
        }
    }
}
