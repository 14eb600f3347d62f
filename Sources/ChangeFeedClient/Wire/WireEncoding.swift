import Model

/// Request bodies in the contract's wire format (API.md's "Mutations"): data goes in as the text it is, once it
/// is known to be one JSON value. `JSONData(canonical:)` takes any text unchecked, and text spliced in as it came
/// could end the value early and go on as members of the request's own (an op more, another `section`).
struct WireEncoding {
    private(set) var bytes: [UInt8] = []
    /// Why the first data that is not one JSON value is not, with whose data it is.
    private var invalidData: String?

    /// `{"sections": [...]}`, a collection's new content.
    /// - Throws: `WriteError.invalidRequest` for data that is not one JSON value, here and below.
    static func content(_ sections: [Section]) throws(WriteError) -> [UInt8] {
        var body = WireEncoding()
        body.object { body in
            body.member("sections", first: true) { body in
                body.array(sections) { body, section in body.section(section) }
            }
        }
        return try body.finished()
    }

    /// `{"ops": [...]}`.
    static func mutation(_ ops: [Op]) throws(WriteError) -> [UInt8] {
        var body = WireEncoding()
        body.object { body in
            body.member("ops", first: true) { body in body.array(ops) { body, op in body.op(op) } }
        }
        return try body.finished()
    }

    /// An upsert's `{"data", "section"?, "index"?}`.
    static func upsert(data: JSONData, section: SectionRef?, index: Int?) throws(WriteError) -> [UInt8] {
        var body = WireEncoding()
        body.object { body in
            body.member("data", first: true) { body in body.raw(data, of: "the item") }
            if let section { body.member("section") { body in body.ref(section) } }
            if let index { body.member("index") { body in body.number(index) } }
        }
        return try body.finished()
    }

    private mutating func op(_ op: Op) {
        object { body in
            switch op {
            case .insertSections(let at, let sections):
                body.kind("insertSections")
                body.member("at") { body in body.number(at) }
                body.member("sections") { body in body.array(sections) { body, section in body.section(section) } }
            case .deleteSections(let refs):
                body.kind("deleteSections")
                body.member("sections") { body in body.array(refs) { body, ref in body.ref(ref) } }
            case .moveSection(let ref, let to):
                body.kind("moveSection")
                body.member("section") { body in body.ref(ref) }
                body.member("to") { body in body.number(to) }
            case .updateSection(let ref, let data):
                body.kind("updateSection")
                body.member("section") { body in body.ref(ref) }
                body.member("data") { body in body.raw(data, of: Self.name(ref)) }
            case .insertItems(let at, let items):
                body.kind("insertItems")
                body.member("at") { body in body.position(at) }
                body.member("items") { body in body.array(items) { body, item in body.item(item) } }
            case .deleteItems(let refs):
                body.kind("deleteItems")
                body.member("items") { body in body.array(refs) { body, ref in body.ref(ref) } }
            case .moveItem(let ref, let to):
                body.kind("moveItem")
                body.member("item") { body in body.ref(ref) }
                body.member("to") { body in body.position(to) }
            case .updateItems(let items):
                body.kind("updateItems")
                body.member("items") { body in body.array(items) { body, item in body.item(item) } }
            }
        }
    }

    private mutating func kind(_ name: String) {
        member("op", first: true) { body in body.string(name) }
    }

    private mutating func section(_ section: Section) {
        object { body in
            body.member("id", first: true) { body in body.string(section.id) }
            body.member("data") { body in body.raw(section.data, of: "section \"\(section.id)\"") }
            body.member("items") { body in body.array(section.items) { body, item in body.item(item) } }
        }
    }

    private mutating func item(_ item: Item) {
        object { body in
            body.member("id", first: true) { body in body.string(item.id) }
            body.member("data") { body in body.raw(item.data, of: "item \"\(item.id)\"") }
        }
    }

    private mutating func ref(_ ref: SectionRef) {
        switch ref {
        case .index(let index): number(index)
        case .id(let id): string(id)
        }
    }

    private mutating func ref(_ ref: ItemRef) {
        switch ref {
        case .id(let id): string(id)
        case .path(let section, let index): pair(section, index)
        }
    }

    private mutating func position(_ position: ItemPosition) {
        pair(position.section, position.index)
    }

    private mutating func pair(_ section: SectionRef, _ index: Int) {
        bytes.append(UInt8(ascii: "["))
        ref(section)
        bytes.append(UInt8(ascii: ","))
        number(index)
        bytes.append(UInt8(ascii: "]"))
    }

    private mutating func object(_ members: (inout WireEncoding) -> Void) {
        bytes.append(UInt8(ascii: "{"))
        members(&self)
        bytes.append(UInt8(ascii: "}"))
    }

    private mutating func member(_ key: String, first: Bool = false, _ value: (inout WireEncoding) -> Void) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        string(key)
        bytes.append(UInt8(ascii: ":"))
        value(&self)
    }

    private mutating func array<T>(_ elements: [T], _ element: (inout WireEncoding, T) -> Void) {
        bytes.append(UInt8(ascii: "["))
        for (offset, value) in elements.enumerated() {
            if offset > 0 { bytes.append(UInt8(ascii: ",")) }
            element(&self, value)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    private mutating func string(_ text: String) {
        bytes.append(contentsOf: JSON.string(text).canonicalText)
    }

    private mutating func number(_ value: Int) {
        bytes.append(contentsOf: String(value).utf8)
    }

    /// `owner`: whose data it is, for the refusal.
    private mutating func raw(_ data: JSONData, of owner: @autoclosure () -> String) {
        if invalidData == nil {
            do throws(JSON.ParseError) {
                _ = try JSON(parsing: data)
            } catch {
                invalidData = "the data of \(owner()) is not one JSON value (\(error.reason) at byte \(error.offset))"
            }
        }
        bytes.append(contentsOf: data.bytes)
    }

    private static func name(_ ref: SectionRef) -> String {
        switch ref {
        case .index(let index): "the section at \(index)"
        case .id(let id): "section \"\(id)\""
        }
    }

    private func finished() throws(WriteError) -> [UInt8] {
        if let invalidData { throw .invalidRequest(invalidData) }
        return bytes
    }
}
