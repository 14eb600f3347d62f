/// A JSON Pointer (RFC 6901): `""` is the whole value, `/a/b` member `b` of member `a`; in a token `~1` stands
/// for `/` and `~0` for `~`; a token addresses an array element when it is an index (`0` or digits without a
/// leading zero) below the array's count. Anything that addresses nothing is missing.
public struct JSONPointer: Hashable, Sendable, CustomStringConvertible {
    /// The pointer as written.
    public let text: String
    /// The unescaped reference tokens, as UTF-8 bytes.
    let tokens: [[UInt8]]
    /// The array index each token stands for, where it is one.
    let indices: [Int?]

    /// Parses a pointer; nil when it is neither empty nor starts with `/`, or has a `~` not followed by 0 or 1.
    /// - Complexity: O(n) for n bytes.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.isEmpty || bytes[0] == UInt8(ascii: "/") else { return nil }
        var tokens: [[UInt8]] = []
        var token: [UInt8] = []
        var offset = 1
        while offset <= bytes.count {
            guard offset < bytes.count, bytes[offset] != UInt8(ascii: "/") else {
                tokens.append(token)
                token = []
                offset += 1
                continue
            }
            if bytes[offset] == UInt8(ascii: "~") {
                guard offset + 1 < bytes.count else { return nil }
                switch bytes[offset + 1] {
                case UInt8(ascii: "0"): token.append(UInt8(ascii: "~"))
                case UInt8(ascii: "1"): token.append(UInt8(ascii: "/"))
                default: return nil
                }
                offset += 2
            } else {
                token.append(bytes[offset])
                offset += 1
            }
        }
        self.text = text
        self.tokens = bytes.isEmpty ? [] : tokens
        self.indices = self.tokens.map(JSONPointer.arrayIndex)
    }

    /// The pointer's text, as written.
    public var description: String { text }

    /// Pointers are equal when their texts have the same bytes (`ExactString`): `/é` written with one code point
    /// and with two address different members.
    public static func == (lhs: JSONPointer, rhs: JSONPointer) -> Bool { lhs.text.hasSameBytes(as: rhs.text) }
    /// Hashes the text's bytes.
    public func hash(into hasher: inout Hasher) { hasher.combine(ExactString(text)) }

    /// `0`, or digits without a leading zero, that fit an `Int`.
    private static func arrayIndex(_ token: [UInt8]) -> Int? {
        guard let first = token.first, first != UInt8(ascii: "0") || token.count == 1, token.count <= 18 else {
            return nil
        }
        var value = 0
        for byte in token {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    /// The value the pointer addresses in `value`, or nil when it is missing.
    /// - Complexity: O(depth) lookups.
    public func evaluate(in value: JSON) -> JSON? {
        var current = value
        for (token, index) in zip(tokens, indices) {
            switch current {
            case .object(let members):
                guard let member = members[ExactString(String(decoding: token, as: UTF8.self))] else { return nil }
                current = member
            case .array(let elements):
                guard let index, index < elements.count else { return nil }
                current = elements[index]
            default:
                return nil
            }
        }
        return current
    }

    /// The byte range of the value the pointer addresses in canonical JSON text, or nil when it is missing.
    /// - Complexity: O(n) for the n bytes before the value, at most.
    func locate(in bytes: [UInt8]) -> Range<Int>? {
        bytes.withUnsafeBufferPointer { locate(in: $0) }
    }

    /// The same in text read through a buffer pointer.
    func locate(in bytes: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        var scanner = CanonicalScanner(bytes: bytes)
        scanner.skipSpace()
        for (token, index) in zip(tokens, indices) {
            guard scanner.enter(token: token, index: index) else { return nil }
        }
        let start = scanner.offset
        guard start < bytes.count else { return nil }
        scanner.skipValue()
        return start..<scanner.offset
    }
}
