/// Writes JSON text into bytes. The server encodes every response with it, so that one changeset is turned into
/// bytes once, without building a tree of values first.
struct JSONWriter {
    private(set) var bytes: [UInt8] = []
    /// Whether the object being written has a member already (so that the next one needs a comma).
    private var objectHasMembers = false

    init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func raw(_ other: [UInt8]) {
        bytes.append(contentsOf: other)
    }

    mutating func integer(_ value: Int) {
        bytes.append(contentsOf: String(value).utf8)
    }

    /// A JSON string: quotes, backslashes and control characters escaped, everything else as UTF-8.
    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): raw("\\\"")
            case UInt8(ascii: "\\"): raw("\\\\")
            case 0x0A: raw("\\n")
            case 0x0D: raw("\\r")
            case 0x09: raw("\\t")
            case 0x08: raw("\\b")
            case 0x0C: raw("\\f")
            case 0..<0x20:
                raw("\\u00")
                bytes.append(Self.hexDigits[Int(byte >> 4)])
                bytes.append(Self.hexDigits[Int(byte & 0xF)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// `{...}`: `members` writes the members with the `field` methods, which place the commas.
    mutating func object(_ members: (inout JSONWriter) -> Void) {
        let outer = objectHasMembers
        objectHasMembers = false
        bytes.append(UInt8(ascii: "{"))
        members(&self)
        bytes.append(UInt8(ascii: "}"))
        objectHasMembers = outer
    }

    /// `"key":` and then what `value` writes.
    mutating func field(_ key: StaticString, _ value: (inout JSONWriter) -> Void) {
        if objectHasMembers { bytes.append(UInt8(ascii: ",")) }
        objectHasMembers = true
        bytes.append(UInt8(ascii: "\""))
        raw(key)
        raw("\":")
        value(&self)
    }

    mutating func field(_ key: StaticString, _ value: String) { field(key) { $0.string(value) } }
    mutating func field(_ key: StaticString, _ value: Int) { field(key) { $0.integer(value) } }
    /// A member whose value is JSON text already (canonical `data`).
    mutating func field(_ key: StaticString, json value: [UInt8]) { field(key) { $0.raw(value) } }

    /// Writes `[element, element, ...]`.
    mutating func array<Element>(_ elements: some Sequence<Element>, _ write: (inout JSONWriter, Element) -> Void) {
        bytes.append(UInt8(ascii: "["))
        var first = true
        for element in elements {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            write(&self, element)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// Writes a value in canonical form: object keys sorted by their UTF-8 bytes, no whitespace, numbers as parsed
    /// (an integer stays an integer; a real is printed in the shortest form that reads back the same, with a
    /// fraction or exponent, so `1.0` stays distinct from `1`).
    mutating func canonical(_ value: JSONValue) {
        switch value.kind {
        case .null: raw("null")
        case .bool: value.isTrue ? raw("true") : raw("false")
        case .integer: integer(value.integer ?? 0)
        case .real: bytes.append(contentsOf: value.real.description.utf8)
        case .string: string(value.string ?? "")
        case .array:
            bytes.append(UInt8(ascii: "["))
            var first = true
            value.forEachElement { element in
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                canonical(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object:
            let members = (value.members ?? []).sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            bytes.append(UInt8(ascii: "{"))
            for (offset, member) in members.enumerated() {
                if offset > 0 { bytes.append(UInt8(ascii: ",")) }
                string(member.key)
                bytes.append(UInt8(ascii: ":"))
                canonical(member.value)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}
