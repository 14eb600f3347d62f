/// A JSON value, for what Model must read inside JSON: view definitions and the operands of their filters.
/// Item data stays canonical text (`JSONData`); views read it in place (`CanonicalScanner`) rather than as trees.
public enum JSON: Hashable, Sendable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, kept as its text so that `1` and `1.0` stay distinct values, as data equality requires.
    case number(String)
    /// A string, unescaped.
    case string(String)
    /// Elements in order.
    case array([JSON])
    /// Members by key; the canonical text lists them sorted by the keys' UTF-8 bytes.
    case object([ExactString: JSON])

    /// The canonical JSON text: object keys sorted by their UTF-8 bytes, no whitespace, strings escaped as the
    /// server escapes them (quote, backslash and control characters only), numbers as they were written.
    /// - Complexity: O(n log n) for n bytes (the key sorts).
    public var canonicalText: [UInt8] {
        var bytes: [UInt8] = []
        write(into: &bytes)
        return bytes
    }

    /// The canonical text as `JSONData`.
    public var data: JSONData { JSONData(canonical: canonicalText) }

    func write(into bytes: inout [UInt8]) {
        switch self {
        case .null: bytes.append(contentsOf: "null".utf8)
        case .bool(let value): bytes.append(contentsOf: (value ? "true" : "false").utf8)
        case .number(let text): bytes.append(contentsOf: text.utf8)
        case .string(let text): JSON.writeString(text, into: &bytes)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (offset, element) in elements.enumerated() {
                if offset > 0 { bytes.append(UInt8(ascii: ",")) }
                element.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            let keys = members.keys.sorted { $0.string.utf8.lexicographicallyPrecedes($1.string.utf8) }
            for (offset, key) in keys.enumerated() {
                if offset > 0 { bytes.append(UInt8(ascii: ",")) }
                JSON.writeString(key.string, into: &bytes)
                bytes.append(UInt8(ascii: ":"))
                members[key]?.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    static func writeString(_ text: String, into bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), byte])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), byte])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0..<0x20:
                bytes.append(contentsOf: "\\u00".utf8)
                bytes.append(hexDigits[Int(byte >> 4)])
                bytes.append(hexDigits[Int(byte & 0xF)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

extension JSON: CustomStringConvertible {
    /// The canonical text.
    public var description: String { String(decoding: canonicalText, as: UTF8.self) }
}
