import Model

/// Reads request bodies into Model's values. Every shape error is a `400 bad_request` naming the JSON path that
/// is wrong; an op's errors also carry the op's index. Paths are passed as autoclosures, so that one is made only
/// for an error, not for each value of a large body.
enum RequestDecoding {
    /// `{"sections": [Section, ...]}` of `PUT /v1/collections/{name}`.
    static func sections(_ body: [UInt8]) throws(HTTPError) -> [Section] {
        let document = try JSONDocument(parsing: body)
        return try document.withRoot { root throws(HTTPError) in
            let members = try object(root, at: "the body", allowed: ["sections"])
            guard let sections = members["sections"] else { throw missing("sections", in: "the body") }
            return try list(sections, at: "sections") { value, path throws(HTTPError) in try section(value, at: path())
            }
        }
    }

    /// `{"ops": [Op, ...]}` of `POST /v1/collections/{name}/mutations`.
    static func ops(_ body: [UInt8]) throws(HTTPError) -> [Op] {
        let document = try JSONDocument(parsing: body)
        return try document.withRoot { root throws(HTTPError) in
            let members = try object(root, at: "the body", allowed: ["ops"])
            guard let ops = members["ops"] else { throw missing("ops", in: "the body") }
            guard let elements = ops.array else { throw wrongType("ops", "an array of ops") }
            var result: [Op] = []
            result.reserveCapacity(elements.count)
            for (index, element) in elements.enumerated() {
                do throws(HTTPError) {
                    result.append(try op(element, at: "ops[\(index)]"))
                } catch {
                    var error = error
                    error.opIndex = index
                    throw error
                }
            }
            return result
        }
    }

    /// The body of `PUT /v1/views/{name}`, in canonical form (Model validates it as a view definition).
    static func canonicalBody(_ body: [UInt8]) throws(HTTPError) -> [UInt8] {
        let document = try JSONDocument(parsing: body)
        return try document.withRoot { root throws(HTTPError) in
            var writer = JSONWriter()
            writer.canonical(root)
            return writer.bytes
        }
    }

    /// The body of `PUT /v1/collections/{name}/items/{id}`: `{"data": ..., "section": ref?, "index": n?}`.
    struct Upsert {
        var data: JSONData
        var section: SectionRef?
        var index: Int?
    }

    static func upsert(_ body: [UInt8]) throws(HTTPError) -> Upsert {
        let document = try JSONDocument(parsing: body)
        return try document.withRoot { root throws(HTTPError) in
            let members = try object(root, at: "the body", allowed: ["data", "section", "index"])
            return Upsert(
                data: members["data"].map(canonical) ?? .null,
                section: try members["section"].map { value throws(HTTPError) in try sectionRef(value, at: "section") },
                index: try members["index"].map { value throws(HTTPError) in try integer(value, at: "index") })
        }
    }

    // MARK: Values

    private static func op(_ value: JSONValue, at path: @autoclosure () -> String) throws(HTTPError) -> Op {
        guard let name = value["op"]?.string else {
            if value.kind != .object { throw wrongType(path(), "an object") }
            throw .badRequest("\(path()) needs \"op\", the name of the op, as a string.")
        }
        switch name {
        case "insertSections":
            let members = try object(value, at: path(), allowed: ["op", "at", "sections"])
            return .insertSections(
                at: try integer(required(members, "at", in: path()), at: "\(path()).at"),
                sections: try list(required(members, "sections", in: path()), at: "\(path()).sections") {
                    value, path throws(HTTPError) in try section(value, at: path())
                })
        case "deleteSections":
            let members = try object(value, at: path(), allowed: ["op", "sections"])
            return .deleteSections(
                try list(required(members, "sections", in: path()), at: "\(path()).sections") {
                    value, path throws(HTTPError) in try sectionRef(value, at: path())
                })
        case "moveSection":
            let members = try object(value, at: path(), allowed: ["op", "section", "to"])
            return .moveSection(
                try sectionRef(required(members, "section", in: path()), at: "\(path()).section"),
                to: try integer(required(members, "to", in: path()), at: "\(path()).to"))
        case "updateSection":
            let members = try object(value, at: path(), allowed: ["op", "section", "data"])
            return .updateSection(
                try sectionRef(required(members, "section", in: path()), at: "\(path()).section"),
                data: members["data"].map(canonical) ?? .null)
        case "insertItems":
            let members = try object(value, at: path(), allowed: ["op", "at", "items"])
            return .insertItems(
                at: try position(required(members, "at", in: path()), at: "\(path()).at"),
                items: try list(required(members, "items", in: path()), at: "\(path()).items") {
                    value, path throws(HTTPError) in try item(value, at: path())
                })
        case "deleteItems":
            let members = try object(value, at: path(), allowed: ["op", "items"])
            return .deleteItems(
                try list(required(members, "items", in: path()), at: "\(path()).items") {
                    value, path throws(HTTPError) in try itemRef(value, at: path())
                })
        case "moveItem":
            let members = try object(value, at: path(), allowed: ["op", "item", "to"])
            return .moveItem(
                try itemRef(required(members, "item", in: path()), at: "\(path()).item"),
                to: try position(required(members, "to", in: path()), at: "\(path()).to"))
        case "updateItems":
            let members = try object(value, at: path(), allowed: ["op", "items"])
            return .updateItems(
                try list(required(members, "items", in: path()), at: "\(path()).items") {
                    value, path throws(HTTPError) in try item(value, at: path())
                })
        default:
            throw .unknownOp(
                "\(path()).op '\(name)' is not an op; the ops are insertSections, deleteSections, moveSection, "
                    + "updateSection, insertItems, deleteItems, moveItem and updateItems.")
        }
    }

    private static func section(_ value: JSONValue, at path: @autoclosure () -> String) throws(HTTPError) -> Section {
        let members = try object(value, at: path(), allowed: ["id", "data", "items"])
        return Section(
            id: try string(required(members, "id", in: path()), at: "\(path()).id"),
            data: members["data"].map(canonical) ?? .null,
            items: try members["items"].map { items throws(HTTPError) in
                try list(items, at: "\(path()).items") { value, path throws(HTTPError) in try item(value, at: path()) }
            } ?? [])
    }

    /// An item of a request: its `data` may be left out, and is then `null` (API.md), in `updateItems` too.
    private static func item(_ value: JSONValue, at path: @autoclosure () -> String) throws(HTTPError) -> Item {
        let members = try object(value, at: path(), allowed: ["id", "data"])
        return Item(
            id: try string(required(members, "id", in: path()), at: "\(path()).id"),
            data: members["data"].map(canonical) ?? .null)
    }

    private static func sectionRef(_ value: JSONValue, at path: @autoclosure () -> String) throws(HTTPError)
        -> SectionRef
    {
        if let index = integral(value) { return .index(index) }
        guard let id = value.string else {
            throw wrongType(path(), "a section index (integer) or a section id (string)")
        }
        return .id(id)
    }

    private static func itemRef(_ value: JSONValue, at path: @autoclosure () -> String) throws(HTTPError) -> ItemRef {
        if let id = value.string { return .id(id) }
        guard value.kind == .array else {
            throw wrongType(path(), "an item id (string) or an index path [section, index]")
        }
        let place = try position(value, at: path())
        return .path(place.section, place.index)
    }

    private static func position(_ value: JSONValue, at path: @autoclosure () -> String) throws(HTTPError)
        -> ItemPosition
    {
        guard let pair = value.array, pair.count == 2 else {
            throw wrongType(path(), "an index path [section, index]: a section index or id, then an integer")
        }
        return ItemPosition(
            section: try sectionRef(pair[0], at: "\(path())[0]"), index: try integer(pair[1], at: "\(path())[1]"))
    }

    // MARK: Primitives

    private static func canonical(_ value: JSONValue) -> JSONData {
        var writer = JSONWriter(capacity: 64)
        writer.canonical(value)
        return JSONData(canonical: writer.bytes)
    }

    /// `value` when it is an object whose keys are all `allowed`; its members are then read by key, without a
    /// dictionary of them.
    private static func object(_ value: JSONValue, at path: @autoclosure () -> String, allowed: [String])
        throws(HTTPError) -> JSONValue
    {
        guard value.kind == .object else { throw wrongType(path(), "an object") }
        if let key = value.firstKey(notIn: allowed) {
            let names = allowed.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
            throw .badRequest("\(path()) has an unknown field \"\(key)\"; it takes \(names).")
        }
        return value
    }

    private static func required(_ members: JSONValue, _ key: String, in path: @autoclosure () -> String)
        throws(HTTPError)
        -> JSONValue
    {
        guard let value = members[key] else { throw missing(key, in: path()) }
        return value
    }

    /// The elements of an array, each read by `element` with its path (`path[index]`, made only for an error).
    private static func list<Element>(
        _ value: JSONValue, at path: @autoclosure () -> String,
        _ element: (JSONValue, @autoclosure () -> String) throws(HTTPError) -> Element
    ) throws(HTTPError) -> [Element] {
        guard let elements = value.array else { throw wrongType(path(), "an array") }
        // The element's path closes over `path`, which `element` cannot keep: it only ever calls it.
        let built: Result<[Element], HTTPError> = withoutActuallyEscaping(path) { path in
            var result: [Element] = []
            result.reserveCapacity(elements.count)
            do throws(HTTPError) {
                for (index, value) in elements.enumerated() { result.append(try element(value, "\(path())[\(index)]")) }
                return .success(result)
            } catch {
                return .failure(error)
            }
        }
        return try built.get()
    }

    private static func string(_ value: JSONValue, at path: @autoclosure () -> String) throws(HTTPError) -> String {
        guard let text = value.string else { throw wrongType(path(), "a string") }
        return text
    }

    private static func integer(_ value: JSONValue, at path: @autoclosure () -> String) throws(HTTPError) -> Int {
        guard let number = integral(value) else { throw wrongType(path(), "an integer") }
        return number
    }

    /// An integer, or a real with no fractional part that fits (`2.0`, `1e3`): JSON does not tell them apart, and
    /// neither does JavaScript, which sends `2.0` as `2` but other encoders do not.
    private static func integral(_ value: JSONValue) -> Int? {
        if let number = value.integer { return number }
        guard value.kind == .real else { return nil }
        let real = value.real
        guard real.rounded(.towardZero) == real, real >= -0x1p63, real < 0x1p63 else { return nil }
        return Int(real)
    }

    private static func missing(_ key: String, in path: @autoclosure () -> String) -> HTTPError {
        .badRequest("\(path()) needs the field \"\(key)\".")
    }

    private static func wrongType(_ path: String, _ expected: String) -> HTTPError {
        .badRequest("\(path) must be \(expected).")
    }
}
