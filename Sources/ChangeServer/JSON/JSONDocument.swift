/// A JSON document parsed into a tape: one 12-byte node per value, kept next to the body's bytes, which strings and
/// numbers point into. Parsing a body costs at most the body plus 12 bytes per value (a value takes at least two
/// bytes of text, `0,`), so a 16 MiB body of empty objects costs about 80 MiB where a tree of allocated values cost
/// a gigabyte. Values inside it are read through `JSONValue`.
struct JSONDocument: ~Copyable {
    private let tape: JSONTape

    /// The deepest nesting of arrays and objects a request may carry.
    static let maximumDepth = 64

    /// Parses a whole body: malformed JSON, invalid UTF-8, duplicate keys, integers that do not fit in 64 bits,
    /// reals that overflow, NUL characters and nesting deeper than `maximumDepth` are all `bad_json`.
    /// - Complexity: O(n) for n bytes; an object's keys are compared for duplicates in O(k) expected for k keys.
    init(parsing bytes: [UInt8]) throws(HTTPError) {
        guard !bytes.isEmpty else { throw .badJSON("the body is empty") }
        do throws(JSONSyntaxError) {
            tape = try JSONTape(parsing: bytes)
        } catch {
            throw .badJSON(error.describe(in: bytes))
        }
    }

    /// Reads the document's root.
    func withRoot<Result>(_ body: (JSONValue) throws(HTTPError) -> Result) throws(HTTPError) -> Result {
        try body(JSONValue(tape, 0))
    }
}

/// A value inside a `JSONDocument`.
struct JSONValue {
    private let tape: JSONTape
    private let index: Int

    fileprivate init(_ tape: JSONTape, _ index: Int) {
        self.tape = tape
        self.index = index
    }

    enum Kind: String {
        case object, array, string, integer, real, bool, null
    }

    private var node: JSONNode { tape.nodes[index] }

    var kind: Kind {
        switch node.kind {
        case .object: .object
        case .array: .array
        case .string, .escapedString: .string
        case .integer: .integer
        case .real: .real
        case .isFalse, .isTrue: .bool
        case .null: .null
        }
    }

    var string: String? {
        tape.string(at: index)
    }

    var integer: Int? {
        node.kind == .integer ? tape.integer(at: index) : nil
    }

    /// The value of a real (0 for anything else).
    var real: Double {
        node.kind == .real ? tape.real(at: index) ?? 0 : 0
    }

    var isTrue: Bool { node.kind == .isTrue }

    var array: [JSONValue]? {
        guard node.kind == .array else { return nil }
        var result: [JSONValue] = []
        result.reserveCapacity(Int(node.b))
        var child = index + 1
        while child < Int(node.a) {
            result.append(JSONValue(tape, child))
            child = tape.next(after: child)
        }
        return result
    }

    /// Calls `body` with each element of an array, in order, without collecting them.
    func forEachElement(_ body: (JSONValue) -> Void) {
        guard node.kind == .array else { return }
        var child = index + 1
        while child < Int(node.a) {
            body(JSONValue(tape, child))
            child = tape.next(after: child)
        }
    }

    /// The object's members with their keys' decoded UTF-8 bytes (a slice of the body unless the key has escapes),
    /// in the order of the text: what canonical form sorts, without making a `String` of each key.
    var memberBytes: [(key: ArraySlice<UInt8>, value: JSONValue)] {
        guard node.kind == .object else { return [] }
        var result: [(key: ArraySlice<UInt8>, value: JSONValue)] = []
        result.reserveCapacity(Int(node.b))
        var key = index + 1
        while key < Int(node.a) {
            result.append((tape.stringBytes(at: key), JSONValue(tape, key + 1)))
            key = tape.next(after: key + 1)
        }
        return result
    }

    /// A string's text as it stands in the body when it has no escapes, which is then its decoded text too.
    var unescapedText: ArraySlice<UInt8>? {
        node.kind == .string ? tape.stringBytes(at: index) : nil
    }

    /// The first of the object's keys that is not one of `allowed` (nil when all are, or for a non-object).
    func firstKey(notIn allowed: [String]) -> String? {
        guard node.kind == .object else { return nil }
        var key = index + 1
        while key < Int(node.a) {
            if !allowed.contains(where: { tape.string(at: key, equals: $0) }) { return tape.string(at: key) }
            key = tape.next(after: key + 1)
        }
        return nil
    }

    subscript(key: String) -> JSONValue? {
        guard node.kind == .object else { return nil }
        var member = index + 1
        while member < Int(node.a) {
            if tape.string(at: member, equals: key) { return JSONValue(tape, member + 1) }
            member = tape.next(after: member + 1)
        }
        return nil
    }
}

/// One value of the tape. Arrays and objects: `a` is the index of the node after their last descendant, `b` the
/// number of elements or members (an object's members are a key node followed by the value's nodes). Strings and
/// numbers: `a` is the offset of their text in the body (after the opening quote), `b` its length.
struct JSONNode {
    enum Kind: UInt8 {
        case null, isFalse, isTrue, integer, real, string, escapedString, array, object
    }

    var kind: Kind
    var a: UInt32
    var b: UInt32
}

/// Why a text is not JSON, and where.
struct JSONSyntaxError: Error {
    var reason: String
    var offset: Int

    /// The reason with the line and column of the offending byte.
    func describe(in bytes: [UInt8]) -> String {
        var line = 1
        var column = 1
        for byte in bytes.prefix(offset) {
            if byte == 0x0A {
                line += 1
                column = 1
            } else {
                column += 1
            }
        }
        return "\(reason) (line \(line), column \(column))"
    }
}

/// The body and its nodes. A class so that values can share it without copying either.
final class JSONTape {
    let bytes: [UInt8]
    fileprivate(set) var nodes: [JSONNode]

    init(parsing bytes: [UInt8]) throws(JSONSyntaxError) {
        self.bytes = bytes
        var parser = JSONParser(bytes: bytes)
        try parser.parseDocument()
        nodes = parser.nodes
    }

    /// The index of the node after the value at `index` and its descendants.
    func next(after index: Int) -> Int {
        let node = nodes[index]
        return node.kind == .array || node.kind == .object ? Int(node.a) : index + 1
    }

    func string(at index: Int) -> String? {
        let node = nodes[index]
        guard node.kind == .string || node.kind == .escapedString else { return nil }
        return String(decoding: stringBytes(at: index), as: UTF8.self)
    }

    /// The decoded UTF-8 bytes of the string at `index`: a slice of the body, or of a decoded copy when the string
    /// has escapes.
    func stringBytes(at index: Int) -> ArraySlice<UInt8> {
        let node = nodes[index]
        let text = bytes[Int(node.a)..<Int(node.a + node.b)]
        return node.kind == .escapedString ? JSONParser.unescape(text)[...] : text
    }

    /// Whether the string at `index` decodes to `text`, compared without copying a string without escapes.
    func string(at index: Int, equals text: String) -> Bool {
        let node = nodes[index]
        guard node.kind == .string else {
            return node.kind == .escapedString && stringBytes(at: index).elementsEqual(text.utf8)
        }
        guard Int(node.b) == text.utf8.count else { return false }
        var text = text
        return text.withUTF8 { wanted in
            bytes.withUnsafeBufferPointer { body in
                UnsafeBufferPointer(rebasing: body[Int(node.a)..<Int(node.a + node.b)]).elementsEqual(wanted)
            }
        }
    }

    func integer(at index: Int) -> Int? {
        let node = nodes[index]
        return JSONParser.integer(bytes[Int(node.a)..<Int(node.a + node.b)])
    }

    func real(at index: Int) -> Double? {
        let node = nodes[index]
        return Double(String(decoding: bytes[Int(node.a)..<Int(node.a + node.b)], as: UTF8.self))
    }
}
