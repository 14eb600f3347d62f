extension JSON {
    /// Why a text is not JSON: what was expected at which byte offset.
    public struct ParseError: Error, Hashable, Sendable {
        /// The byte offset where parsing stopped.
        public var offset: Int
        /// What was expected there.
        public var reason: String
    }

    /// How deep arrays and objects may nest in a parsed text: recursion stays far from the stack's limit.
    static let maximumDepth = 512

    /// Parses JSON text (RFC 8259: whitespace allowed, `\u` escapes with surrogate pairs, numbers kept as written).
    /// - Throws: `ParseError` for anything else, trailing text or nesting deeper than 512 included.
    /// - Complexity: O(n) for n bytes.
    public init(parsing bytes: [UInt8]) throws(ParseError) {
        var parser = JSONParser(bytes: bytes)
        self = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.offset == bytes.count else { throw parser.failure("trailing text") }
    }

    /// Parses the canonical text of item or section data.
    public init(parsing data: JSONData) throws(ParseError) {
        try self.init(parsing: data.bytes)
    }
}

/// A recursive-descent reader of JSON text.
private struct JSONParser {
    let bytes: [UInt8]
    var offset = 0

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    func failure(_ reason: String) -> JSON.ParseError { JSON.ParseError(offset: offset, reason: reason) }

    private var current: UInt8? { offset < bytes.count ? bytes[offset] : nil }

    mutating func skipSpace() {
        while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { offset += 1 }
    }

    mutating func value(depth: Int) throws(JSON.ParseError) -> JSON {
        skipSpace()
        guard let byte = current else { throw failure("a value expected") }
        switch byte {
        case UInt8(ascii: "{"):
            guard depth < JSON.maximumDepth else { throw failure("nested too deeply") }
            return try object(depth: depth + 1)
        case UInt8(ascii: "["):
            guard depth < JSON.maximumDepth else { throw failure("nested too deeply") }
            return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        default: return .number(try number())
        }
    }

    private mutating func literal(_ word: StaticString, _ value: JSON) throws(JSON.ParseError) -> JSON {
        let count = word.utf8CodeUnitCount
        let matches = word.withUTF8Buffer { word in
            offset + count <= bytes.count && bytes[offset..<(offset + count)].elementsEqual(word)
        }
        guard matches else { throw failure("\(word) expected") }
        offset += count
        return value
    }

    private mutating func object(depth: Int) throws(JSON.ParseError) -> JSON {
        offset += 1
        var members: [ExactString: JSON] = [:]
        skipSpace()
        if current == UInt8(ascii: "}") {
            offset += 1
            return .object(members)
        }
        while true {
            skipSpace()
            guard current == UInt8(ascii: "\"") else { throw failure("a member name expected") }
            let key = try string()
            skipSpace()
            guard current == UInt8(ascii: ":") else { throw failure("':' expected") }
            offset += 1
            guard members.updateValue(try value(depth: depth), forKey: ExactString(key)) == nil else {
                throw failure("member \(key.quotedAsJSON) appears twice")
            }
            skipSpace()
            switch current {
            case UInt8(ascii: ","): offset += 1
            case UInt8(ascii: "}"):
                offset += 1
                return .object(members)
            default: throw failure("',' or '}' expected")
            }
        }
    }

    private mutating func array(depth: Int) throws(JSON.ParseError) -> JSON {
        offset += 1
        var elements: [JSON] = []
        skipSpace()
        if current == UInt8(ascii: "]") {
            offset += 1
            return .array(elements)
        }
        while true {
            elements.append(try value(depth: depth))
            skipSpace()
            switch current {
            case UInt8(ascii: ","): offset += 1
            case UInt8(ascii: "]"):
                offset += 1
                return .array(elements)
            default: throw failure("',' or ']' expected")
            }
        }
    }

    private mutating func number() throws(JSON.ParseError) -> String {
        let start = offset
        if current == UInt8(ascii: "-") { offset += 1 }
        guard let first = current, isDigit(first) else { throw failure("a value expected") }
        offset += 1
        if first != UInt8(ascii: "0") { skipDigits() }
        if current == UInt8(ascii: ".") {
            offset += 1
            guard try digitsFollow() else { throw failure("digits expected after '.'") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            offset += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { offset += 1 }
            guard try digitsFollow() else { throw failure("digits expected in the exponent") }
        }
        return String(decoding: bytes[start..<offset], as: UTF8.self)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private mutating func skipDigits() {
        while let byte = current, isDigit(byte) { offset += 1 }
    }

    private mutating func digitsFollow() throws(JSON.ParseError) -> Bool {
        let start = offset
        skipDigits()
        return offset > start
    }

    /// Reads a string at the opening quote; the text between the quotes must be valid UTF-8.
    mutating func string() throws(JSON.ParseError) -> String {
        offset += 1
        var decoded: [UInt8] = []
        while true {
            guard let byte = current else { throw failure("unterminated string") }
            offset += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: decoded, as: UTF8.self) else { throw failure("invalid UTF-8") }
                return text
            case UInt8(ascii: "\\"):
                try escape(into: &decoded)
            case 0..<0x20:
                throw failure("control character in a string")
            default:
                decoded.append(byte)
            }
        }
    }

    private mutating func escape(into decoded: inout [UInt8]) throws(JSON.ParseError) {
        guard let byte = current else { throw failure("unterminated string") }
        offset += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(byte)
        case UInt8(ascii: "b"): decoded.append(0x08)
        case UInt8(ascii: "f"): decoded.append(0x0C)
        case UInt8(ascii: "n"): decoded.append(0x0A)
        case UInt8(ascii: "r"): decoded.append(0x0D)
        case UInt8(ascii: "t"): decoded.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hex4()
            if (0xD800..<0xDC00).contains(scalar) {
                guard current == UInt8(ascii: "\\"), offset + 1 < bytes.count, bytes[offset + 1] == UInt8(ascii: "u")
                else { throw failure("unpaired surrogate") }
                offset += 2
                let low = try hex4()
                guard (0xDC00..<0xE000).contains(low) else { throw failure("unpaired surrogate") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw failure("unpaired surrogate") }
            decoded.append(contentsOf: String(Character(unicode)).utf8)
        default:
            throw failure("unknown escape")
        }
    }

    private mutating func hex4() throws(JSON.ParseError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = current, let digit = byte.hexDigitValue else {
                throw failure("four hex digits expected")
            }
            value = value << 4 | UInt32(digit)
            offset += 1
        }
        return value
    }
}
