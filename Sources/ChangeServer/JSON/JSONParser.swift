import Model

/// A recursive-descent reader of RFC 8259 JSON that writes the tape of `JSONDocument`: no value is allocated, and
/// the tape is sized once from a first pass over the text, so that parsing never holds two copies of it while it
/// grows. It refuses what jansson refused here before it: invalid UTF-8, `\u0000`, lone surrogates, duplicate keys,
/// integers beyond 64 bits, reals that overflow, nesting deeper than `JSONDocument.maximumDepth`.
struct JSONParser {
    private let bytes: [UInt8]
    private var offset = 0
    private(set) var nodes: [JSONNode] = []

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Parses the whole text: one value with optional whitespace around it.
    /// - Complexity: O(n) for n bytes.
    mutating func parseDocument() throws(JSONSyntaxError) {
        guard bytes.count < Int(UInt32.max) else { throw failure("the text is larger than 4 GiB") }
        nodes.reserveCapacity(Self.nodeBound(bytes))
        try value(depth: 0)
        skipSpace()
        guard offset == bytes.count else { throw failure("end of text expected") }
    }

    /// The number of values in the text, if it is JSON: every value but the root follows a `,` (an element or a
    /// member's key), a `:` (a member's value), or a `[` or `{` that is not closed at once (the first element or
    /// key), outside strings.
    private static func nodeBound(_ bytes: [UInt8]) -> Int {
        var count = 1
        var inString = false
        var escaped = false
        var afterOpening = false
        for byte in bytes {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case 0x20, 0x0A, 0x0D, 0x09: continue
            case UInt8(ascii: "]"), UInt8(ascii: "}"): afterOpening = false
            default:
                if afterOpening { count += 1 }
                afterOpening = false
                switch byte {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: ","), UInt8(ascii: ":"): count += 1
                case UInt8(ascii: "["), UInt8(ascii: "{"): afterOpening = true
                default: break
                }
            }
        }
        return count
    }

    private func failure(_ reason: String) -> JSONSyntaxError {
        JSONSyntaxError(reason: reason, offset: offset)
    }

    private var current: UInt8? { offset < bytes.count ? bytes[offset] : nil }

    private mutating func skipSpace() {
        while offset < bytes.count {
            switch bytes[offset] {
            case 0x20, 0x0A, 0x0D, 0x09: offset += 1
            default: return
            }
        }
    }

    private mutating func value(depth: Int) throws(JSONSyntaxError) {
        skipSpace()
        guard let byte = current else { throw failure("unexpected end of text") }
        switch byte {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard depth < JSONDocument.maximumDepth else {
                throw failure("it nests arrays and objects deeper than \(JSONDocument.maximumDepth) levels")
            }
            try container(isObject: byte == UInt8(ascii: "{"), depth: depth + 1)
        case UInt8(ascii: "\""): try string()
        case UInt8(ascii: "t"): try literal("true", .isTrue)
        case UInt8(ascii: "f"): try literal("false", .isFalse)
        case UInt8(ascii: "n"): try literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
        default: throw failure("invalid token")
        }
    }

    private mutating func container(isObject: Bool, depth: Int) throws(JSONSyntaxError) {
        let index = nodes.count
        nodes.append(JSONNode(kind: isObject ? .object : .array, a: 0, b: 0))
        let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
        offset += 1
        skipSpace()
        var count: UInt32 = 0
        if current == close {
            offset += 1
        } else {
            while true {
                if isObject {
                    skipSpace()
                    guard current == UInt8(ascii: "\"") else { throw failure("string or '}' expected") }
                    try string()
                    skipSpace()
                    guard current == UInt8(ascii: ":") else { throw failure("':' expected") }
                    offset += 1
                }
                try value(depth: depth)
                count += 1
                skipSpace()
                if current == UInt8(ascii: ",") {
                    offset += 1
                    continue
                }
                guard current == close else {
                    throw failure(isObject ? "',' or '}' expected" : "',' or ']' expected")
                }
                offset += 1
                break
            }
        }
        nodes[index].a = UInt32(nodes.count)
        nodes[index].b = count
        if isObject && count > 1 { try checkDuplicateKeys(object: index) }
    }

    /// Refuses an object that names a key twice (after unescaping).
    private func checkDuplicateKeys(object index: Int) throws(JSONSyntaxError) {
        var seen = Set<[UInt8]>(minimumCapacity: Int(nodes[index].b))
        var key = index + 1
        let end = Int(nodes[index].a)
        while key < end {
            let node = nodes[key]
            let text = bytes[Int(node.a)..<Int(node.a + node.b)]
            let decoded = node.kind == .escapedString ? Self.unescape(text) : Array(text)
            guard seen.insert(decoded).inserted else {
                throw JSONSyntaxError(reason: "duplicate object key", offset: Int(node.a))
            }
            let value = nodes[key + 1]
            key = value.kind == .array || value.kind == .object ? Int(value.a) : key + 2
        }
    }

    private mutating func literal(_ word: StaticString, _ kind: JSONNode.Kind) throws(JSONSyntaxError) {
        let expected = word.withUTF8Buffer { Array($0) }
        guard offset + expected.count <= bytes.count, bytes[offset..<offset + expected.count].elementsEqual(expected)
        else { throw failure("invalid token") }
        nodes.append(JSONNode(kind: kind, a: UInt32(offset), b: UInt32(expected.count)))
        offset += expected.count
    }

    // MARK: Strings

    private mutating func string() throws(JSONSyntaxError) {
        offset += 1
        let start = offset
        var escaped = false
        while true {
            guard let byte = current else { throw failure("premature end of string") }
            switch byte {
            case UInt8(ascii: "\""):
                nodes.append(
                    JSONNode(kind: escaped ? .escapedString : .string, a: UInt32(start), b: UInt32(offset - start)))
                offset += 1
                return
            case UInt8(ascii: "\\"):
                escaped = true
                try escape()
            case 0..<0x20:
                throw failure("control character in string")
            case 0x80...:
                try utf8Sequence()
            default:
                offset += 1
            }
        }
    }

    private mutating func escape() throws(JSONSyntaxError) {
        offset += 1
        guard let byte = current else { throw failure("premature end of string") }
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
            UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            offset += 1
        case UInt8(ascii: "u"):
            let code = try hexQuad()
            switch code {
            case 0: throw failure("\\u0000 is not allowed")
            case 0xD800...0xDBFF:
                guard current == UInt8(ascii: "\\"), offset + 1 < bytes.count, bytes[offset + 1] == UInt8(ascii: "u")
                else { throw failure("invalid Unicode: a lone high surrogate") }
                offset += 1
                guard (0xDC00...0xDFFF).contains(try hexQuad()) else {
                    throw failure("invalid Unicode: a high surrogate without its low one")
                }
            case 0xDC00...0xDFFF: throw failure("invalid Unicode: a lone low surrogate")
            default: break
            }
        default:
            throw failure("invalid escape")
        }
    }

    /// `uXXXX` at `offset` (on the `u`): the code unit.
    private mutating func hexQuad() throws(JSONSyntaxError) -> UInt32 {
        offset += 1
        guard offset + 4 <= bytes.count else { throw failure("invalid escape") }
        var code: UInt32 = 0
        for byte in bytes[offset..<offset + 4] {
            guard let digit = byte.hexDigitValue else { throw failure("invalid escape") }
            code = code << 4 | UInt32(digit)
        }
        offset += 4
        return code
    }

    /// A multi-byte UTF-8 sequence at `offset`: no overlong forms, no surrogates, nothing past U+10FFFF.
    private mutating func utf8Sequence() throws(JSONSyntaxError) {
        let lead = bytes[offset]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0:
            length = 3
            low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED:
            length = 3
            high = 0x9F
        case 0xF0:
            length = 4
            low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4:
            length = 4
            high = 0x8F
        default: throw failure("invalid UTF-8")
        }
        guard offset + length <= bytes.count, (low...high).contains(bytes[offset + 1]),
            bytes[offset + 2..<offset + length].allSatisfy({ (0x80...0xBF).contains($0) })
        else { throw failure("invalid UTF-8") }
        offset += length
    }

    /// The UTF-8 bytes of a string's text, escapes resolved; the text was validated by the parser.
    static func unescape(_ text: ArraySlice<UInt8>) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(text.count)
        var index = text.startIndex
        func quad(_ at: Int) -> UInt32 {
            text[at..<at + 4].reduce(0) { $0 << 4 | UInt32($1.hexDigitValue ?? 0) }
        }
        while index < text.endIndex {
            let byte = text[index]
            guard byte == UInt8(ascii: "\\"), index + 1 < text.endIndex else {
                result.append(byte)
                index += 1
                continue
            }
            let kind = text[index + 1]
            index += 2
            switch kind {
            case UInt8(ascii: "b"): result.append(0x08)
            case UInt8(ascii: "f"): result.append(0x0C)
            case UInt8(ascii: "n"): result.append(0x0A)
            case UInt8(ascii: "r"): result.append(0x0D)
            case UInt8(ascii: "t"): result.append(0x09)
            case UInt8(ascii: "u") where index + 4 <= text.endIndex:
                var scalar = quad(index)
                index += 4
                if (0xD800...0xDBFF).contains(scalar), index + 6 <= text.endIndex {
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (quad(index + 2) - 0xDC00)
                    index += 6
                }
                if let unicode = Unicode.Scalar(scalar) { result.append(contentsOf: Array(String(unicode).utf8)) }
            default: result.append(kind)
            }
        }
        return result
    }

    // MARK: Numbers

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`: an integer when it has neither fraction nor exponent.
    private mutating func number() throws(JSONSyntaxError) {
        let start = offset
        var isReal = false
        if current == UInt8(ascii: "-") { offset += 1 }
        if current == UInt8(ascii: "0") {
            offset += 1
        } else {
            guard digits() > 0 else { throw failure("invalid number") }
        }
        if current == UInt8(ascii: ".") {
            offset += 1
            isReal = true
            guard digits() > 0 else { throw failure("invalid number") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            offset += 1
            isReal = true
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { offset += 1 }
            guard digits() > 0 else { throw failure("invalid number") }
        }
        let text = bytes[start..<offset]
        if isReal {
            guard let real = Double(String(decoding: text, as: UTF8.self)), real.isFinite else {
                throw JSONSyntaxError(reason: "real number overflow", offset: start)
            }
            // A number that is not 0 but reads as 0 (`1e-400`) does not fit either: it was taken as 0, even as an
            // index.
            let significand = text.prefix { $0 != UInt8(ascii: "e") && $0 != UInt8(ascii: "E") }
            guard real != 0 || !significand.contains(where: { $0 >= UInt8(ascii: "1") && $0 <= UInt8(ascii: "9") })
            else {
                throw JSONSyntaxError(reason: "real number underflow", offset: start)
            }
        } else {
            guard Self.integer(text) != nil else { throw JSONSyntaxError(reason: "too big integer", offset: start) }
        }
        nodes.append(JSONNode(kind: isReal ? .real : .integer, a: UInt32(start), b: UInt32(offset - start)))
    }

    private mutating func digits() -> Int {
        let start = offset
        while let byte = current, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { offset += 1 }
        return offset - start
    }

    /// The integer an integer's text stands for; nil when it does not fit in 64 bits.
    static func integer(_ text: ArraySlice<UInt8>) -> Int? {
        let negative = text.first == UInt8(ascii: "-")
        var value = 0
        for byte in text.dropFirst(negative ? 1 : 0) {
            let digit = Int(byte &- UInt8(ascii: "0"))
            let (shifted, overflowShift) = value.multipliedReportingOverflow(by: 10)
            let (next, overflowAdd) =
                negative ? shifted.subtractingReportingOverflow(digit) : shifted.addingReportingOverflow(digit)
            guard !overflowShift, !overflowAdd else { return nil }
            value = next
        }
        return value
    }
}
