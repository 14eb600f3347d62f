/// The wire form of a definition: `{"source", "filter"?, "sectionBy"?, "sortBy"?, "limit"?}` as API.md writes it.
extension ViewDefinition {
    /// Parses and validates a request body (the server's canonical text of it, or any JSON text).
    /// - Throws: `ViewDefinitionError` naming the bad part: text that is not JSON, an unknown field, a wrong
    ///   type, an unknown op, two ops in one leaf, a bad pointer, nesting over 16, over 256 leaves, a limit < 1.
    /// - Complexity: O(n) for n bytes.
    public init(json bytes: [UInt8]) throws(ViewDefinitionError) {
        let value: JSON
        do {
            value = try JSON(parsing: bytes)
        } catch {
            throw ViewDefinitionError(part: "", reason: "not JSON: \(error.reason) at byte \(error.offset)")
        }
        try self.init(json: value)
    }

    /// Validates a parsed definition; see `init(json:)`. An optional part given as `null` is absent, as encoders
    /// that write every field (JavaScript's `JSON.stringify` of an object with `filter: null`) send it; the
    /// canonical form leaves it out.
    public init(json value: JSON) throws(ViewDefinitionError) {
        let members = try Wire.members(value, part: "", allowed: ["source", "filter", "sectionBy", "sortBy", "limit"])
            .filter { $0.key == "source" || $0.value != .null }
        guard let source = members["source"] else {
            throw ViewDefinitionError(part: "source", reason: "missing")
        }
        guard case .string(let name) = source else {
            throw ViewDefinitionError(part: "source", reason: "must be a string")
        }
        let filter = try members["filter"].map { value throws(ViewDefinitionError) in
            try Wire.filter(value, part: "filter", depth: 1)
        }
        let sectionBy = try members["sectionBy"].map { value throws(ViewDefinitionError) in
            try Wire.key(value, part: "sectionBy")
        }
        var sortBy: [ViewKey] = []
        if let value = members["sortBy"] {
            guard case .array(let elements) = value else {
                throw ViewDefinitionError(part: "sortBy", reason: "must be an array")
            }
            for (index, element) in elements.enumerated() {
                sortBy.append(try Wire.key(element, part: "sortBy[\(index)]"))
            }
        }
        let limit = try members["limit"].map { value throws(ViewDefinitionError) in try Wire.limit(value) }
        try self.init(source: name, filter: filter, sectionBy: sectionBy, sortBy: sortBy, limit: limit)
    }

    /// The definition in canonical JSON form (keys sorted, `order` always written, absent parts left out), for
    /// `GET` answers and the journal; `init(json:)` reads it back to an equal definition.
    /// - Complexity: O(size of the definition).
    public var canonicalJSON: JSONData { JSON.object(wireMembers).data }

    private var wireMembers: [ExactString: JSON] {
        var members: [ExactString: JSON] = ["source": .string(source)]
        if let filter { members["filter"] = filter.wire }
        if let sectionBy { members["sectionBy"] = sectionBy.wire }
        if !sortBy.isEmpty { members["sortBy"] = .array(sortBy.map(\.wire)) }
        if let limit { members["limit"] = .number(String(limit)) }
        return members
    }
}

extension ViewKey {
    var wire: JSON { .object(["field": .string(field.text), "order": .string(descending ? "desc" : "asc")]) }
}

extension ViewFilter {
    var wire: JSON {
        switch self {
        case .all(let filters): .object(["all": .array(filters.map(\.wire))])
        case .any(let filters): .object(["any": .array(filters.map(\.wire))])
        case .not(let filter): .object(["not": filter.wire])
        case .leaf(let field, let test): .object(["field": .string(field.text), ExactString(test.name): test.operand])
        }
    }
}

/// Reading the parts of the wire form.
private enum Wire {
    static let ops: Set<String> = ["eq", "ne", "lt", "le", "gt", "ge", "in", "exists", "prefix"]
    static let combinators: Set<String> = ["all", "any", "not"]

    static func members(_ value: JSON, part: String, allowed: Set<String>) throws(ViewDefinitionError)
        -> [ExactString: JSON]
    {
        guard case .object(let members) = value else {
            throw ViewDefinitionError(part: part, reason: "must be an object")
        }
        if let unknown = members.keys.map(\.string).filter({ !allowed.contains($0) }).min() {
            throw ViewDefinitionError(part: part, reason: "unknown field \(unknown.quotedAsJSON)")
        }
        return members
    }

    static func pointer(_ value: JSON?, part: String) throws(ViewDefinitionError) -> JSONPointer {
        guard let value else { throw ViewDefinitionError(part: part, reason: "missing") }
        guard case .string(let text) = value else { throw ViewDefinitionError(part: part, reason: "must be a string") }
        guard let pointer = JSONPointer(text) else {
            throw ViewDefinitionError(part: part, reason: "bad pointer \(text.quotedAsJSON)")
        }
        return pointer
    }

    static func key(_ value: JSON, part: String) throws(ViewDefinitionError) -> ViewKey {
        let members = try members(value, part: part, allowed: ["field", "order"])
        let field = try pointer(members["field"], part: "\(part).field")
        switch members["order"] {
        case nil, .string("asc"): return ViewKey(field: field)
        case .string("desc"): return ViewKey(field: field, descending: true)
        default: throw ViewDefinitionError(part: "\(part).order", reason: "must be \"asc\" or \"desc\"")
        }
    }

    /// An integer, or a real with no fractional part that fits (`10.0`, `1e2`), as the ops' indices are read:
    /// JSON does not tell them apart, and some encoders write every number as a real.
    static func limit(_ value: JSON) throws(ViewDefinitionError) -> Int {
        guard case .number(let text) = value, let limit = Int(text) ?? integral(text) else {
            throw ViewDefinitionError(part: "limit", reason: "must be an integer")
        }
        guard limit >= 1 else { throw ViewDefinitionError(part: "limit", reason: "must be at least 1, got \(limit)") }
        return limit
    }

    private static func integral(_ text: String) -> Int? {
        guard let real = Double(text), real.rounded(.towardZero) == real, real >= -0x1p63, real < 0x1p63 else {
            return nil
        }
        return Int(real)
    }

    static func filter(_ value: JSON, part: String, depth: Int) throws(ViewDefinitionError) -> ViewFilter {
        guard case .object(let members) = value else {
            throw ViewDefinitionError(part: part, reason: "must be an object")
        }
        guard depth <= ViewDefinition.maximumDepth else {
            throw ViewDefinitionError(part: part, reason: "nested deeper than \(ViewDefinition.maximumDepth)")
        }
        if members["field"] != nil { return try leaf(members, part: part) }
        let keys = members.keys.map(\.string).sorted()
        if let unknown = keys.first(where: { !combinators.contains($0) && !ops.contains($0) }) {
            throw ViewDefinitionError(part: part, reason: "unknown op \(unknown.quotedAsJSON)")
        }
        guard keys.count == 1, let key = keys.first, combinators.contains(key), let operand = members[ExactString(key)]
        else {
            if keys.contains(where: ops.contains) {
                throw ViewDefinitionError(part: "\(part).field", reason: "missing")
            }
            let found = keys.isEmpty ? "none" : keys.joined(separator: ", ")
            throw ViewDefinitionError(
                part: part, reason: "expected a leaf or exactly one of all, any, not (found \(found))")
        }
        if key == "not" { return .not(try filter(operand, part: "\(part).not", depth: depth + 1)) }
        guard case .array(let elements) = operand else {
            throw ViewDefinitionError(part: "\(part).\(key)", reason: "must be an array")
        }
        var filters: [ViewFilter] = []
        for (index, element) in elements.enumerated() {
            filters.append(try filter(element, part: "\(part).\(key)[\(index)]", depth: depth + 1))
        }
        return key == "all" ? .all(filters) : .any(filters)
    }

    private static func leaf(_ members: [ExactString: JSON], part: String) throws(ViewDefinitionError) -> ViewFilter {
        let field = try pointer(members["field"], part: "\(part).field")
        let names = members.keys.map(\.string).filter { $0 != "field" }.sorted()
        if let unknown = names.first(where: { !ops.contains($0) }) {
            throw ViewDefinitionError(part: part, reason: "unknown op \(unknown.quotedAsJSON)")
        }
        guard names.count == 1, let name = names.first, let operand = members[ExactString(name)] else {
            let count = names.count == 2 ? "two" : "\(names.count)"
            let reason = names.isEmpty ? "no op in leaf" : "\(count) ops in one leaf (\(names.joined(separator: ", ")))"
            throw ViewDefinitionError(part: part, reason: reason)
        }
        return .leaf(field: field, try test(name, operand, part: "\(part).\(name)"))
    }

    private static func test(_ name: String, _ operand: JSON, part: String) throws(ViewDefinitionError) -> ViewTest {
        switch (name, operand) {
        case ("eq", _): return .eq(operand)
        case ("ne", _): return .ne(operand)
        case ("lt", _): return .lt(operand)
        case ("le", _): return .le(operand)
        case ("gt", _): return .gt(operand)
        case ("ge", _): return .ge(operand)
        case ("in", .array(let values)): return .in(values)
        case ("exists", .bool(let value)): return .exists(value)
        case ("prefix", .string(let value)): return .prefix(value)
        case ("in", _): throw ViewDefinitionError(part: part, reason: "must be an array")
        case ("exists", _): throw ViewDefinitionError(part: part, reason: "must be a boolean")
        default: throw ViewDefinitionError(part: part, reason: "must be a string")
        }
    }
}
