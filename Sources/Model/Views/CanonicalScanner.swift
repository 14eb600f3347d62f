/// Reads JSON text in place, without building values: steps into members and elements, skips values, decodes
/// strings. Views evaluate their pointers on item data this way, for the cost of the bytes before the value.
/// The text is assumed valid (item data is canonical JSON); on anything else the scanner stops at the end of the
/// text or at the odd byte and reports a miss, never traps.
///
/// It reads the text through a buffer pointer (no bounds checks, no reference counting per byte), so a scanner
/// must not outlive the buffer it was made with: make it inside `withUnsafeBufferPointer`.
struct CanonicalScanner {
    let bytes: UnsafeBufferPointer<UInt8>
    var offset = 0

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    private func byte(_ at: Int) -> UInt8 { at < bytes.count ? bytes[at] : 0 }

    mutating func skipSpace() {
        while offset < bytes.count, CanonicalScanner.isSpace(bytes[offset]) { offset += 1 }
    }

    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 }

    /// Steps into the member `token` of the object at `offset`, or the element `index` of the array there.
    /// - Returns: false when there is none (then `offset` is meaningless).
    mutating func enter(token: [UInt8], index: Int?) -> Bool {
        switch byte(offset) {
        case UInt8(ascii: "{"):
            offset += 1
            skipSpace()
            if byte(offset) == UInt8(ascii: "}") { return false }
            while offset < bytes.count {
                skipSpace()
                guard byte(offset) == UInt8(ascii: "\"") else { return false }
                let keyStart = offset
                let escaped = skipString()
                let matches = keyMatches(keyStart..<offset, token, escaped: escaped)
                skipSpace()
                guard byte(offset) == UInt8(ascii: ":") else { return false }
                offset += 1
                skipSpace()
                if matches { return true }
                skipValue()
                skipSpace()
                guard byte(offset) == UInt8(ascii: ",") else { return false }
                offset += 1
            }
            return false
        case UInt8(ascii: "["):
            guard let index else { return false }
            offset += 1
            skipSpace()
            if byte(offset) == UInt8(ascii: "]") { return false }
            for _ in 0..<index {
                skipValue()
                skipSpace()
                guard byte(offset) == UInt8(ascii: ",") else { return false }
                offset += 1
                skipSpace()
            }
            return offset < bytes.count
        default:
            return false
        }
    }

    /// Finds the members named `tokens` of the object at `offset` in one pass over it: `ranges[k]` becomes the
    /// range of member `tokens[k]`'s value (the first such member), or nil.
    /// - Returns: false when the value at `offset` is not an object (then `ranges` is untouched).
    /// - Complexity: O(n) for the n bytes up to the last member found.
    mutating func locateMembers(_ tokens: [[UInt8]], into ranges: UnsafeMutableBufferPointer<Range<Int>?>) -> Bool {
        guard byte(offset) == UInt8(ascii: "{") else { return false }
        for k in ranges.indices { ranges[k] = nil }
        var missing = tokens.count
        offset += 1
        skipSpace()
        while offset < bytes.count, missing > 0 {
            guard byte(offset) == UInt8(ascii: "\"") else { return true }
            let keyStart = offset
            let escaped = skipString()
            let key = keyStart..<offset
            skipSpace()
            guard byte(offset) == UInt8(ascii: ":") else { return true }
            offset += 1
            skipSpace()
            let start = offset
            guard start < bytes.count else { return true }
            skipValue()
            for (k, token) in tokens.enumerated() where ranges[k] == nil && keyMatches(key, token, escaped: escaped) {
                ranges[k] = start..<offset
                missing -= 1
            }
            skipSpace()
            guard byte(offset) == UInt8(ascii: ",") else { return true }
            offset += 1
            skipSpace()
        }
        return true
    }

    /// Whether the string at `range` (with its quotes, and escapes when `escaped`) is `token`.
    private func keyMatches(_ range: Range<Int>, _ token: [UInt8], escaped: Bool) -> Bool {
        let inner = (range.lowerBound + 1)..<(range.upperBound - 1)
        guard inner.upperBound >= inner.lowerBound else { return false }
        if escaped { return decodeString(range) == token }
        return CanonicalScanner.equal(UnsafeBufferPointer(rebasing: bytes[inner]), token)
    }

    /// Whether two byte strings are equal: lengths first, then eight bytes at a time.
    static func equal(_ text: UnsafeBufferPointer<UInt8>, _ other: [UInt8]) -> Bool {
        guard text.count == other.count else { return false }
        return other.withUnsafeBufferPointer { other in
            let count = text.count
            var at = 0
            let left = UnsafeRawBufferPointer(text)
            let right = UnsafeRawBufferPointer(other)
            while at + 8 <= count {
                if left.loadUnaligned(fromByteOffset: at, as: UInt64.self)
                    != right.loadUnaligned(fromByteOffset: at, as: UInt64.self)
                {
                    return false
                }
                at += 8
            }
            while at < count {
                if text[at] != other[at] { return false }
                at += 1
            }
            return true
        }
    }

    /// Moves past the value at `offset`.
    mutating func skipValue() {
        switch byte(offset) {
        case UInt8(ascii: "\""):
            skipString()
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            while offset < bytes.count {
                switch bytes[offset] {
                case UInt8(ascii: "\""):
                    skipString()
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 {
                        offset += 1
                        return
                    }
                default:
                    break
                }
                offset += 1
            }
        default:
            while offset < bytes.count {
                switch bytes[offset] {
                case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x0A, 0x0D, 0x09: return
                default: offset += 1
                }
            }
        }
    }

    /// Moves past the string whose opening quote is at `offset`.
    /// - Returns: whether the string holds an escape.
    @discardableResult
    mutating func skipString() -> Bool {
        var escaped = false
        offset += 1
        while offset < bytes.count {
            switch bytes[offset] {
            case UInt8(ascii: "\""):
                offset += 1
                return escaped
            case UInt8(ascii: "\\"):
                escaped = true
                offset += 2
            default:
                offset += 1
            }
        }
        return escaped
    }

    /// The UTF-8 bytes a string stands for; `range` spans it with its quotes.
    /// - Complexity: O(length).
    func decodeString(_ range: Range<Int>) -> [UInt8] {
        var decoded: [UInt8] = []
        decoded.reserveCapacity(range.count)
        var at = range.lowerBound + 1
        let end = range.upperBound - 1
        while at < end {
            let current = bytes[at]
            guard current == UInt8(ascii: "\\"), at + 1 < end else {
                decoded.append(current)
                at += 1
                continue
            }
            at += 2
            switch bytes[at - 1] {
            case UInt8(ascii: "b"): decoded.append(0x08)
            case UInt8(ascii: "f"): decoded.append(0x0C)
            case UInt8(ascii: "n"): decoded.append(0x0A)
            case UInt8(ascii: "r"): decoded.append(0x0D)
            case UInt8(ascii: "t"): decoded.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = hex4(at)
                at += 4
                if (0xD800..<0xDC00).contains(scalar), byte(at) == UInt8(ascii: "\\"), byte(at + 1) == UInt8(ascii: "u")
                {
                    let low = hex4(at + 2)
                    if (0xDC00..<0xE000).contains(low) {
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        at += 6
                    }
                }
                decoded.append(contentsOf: String(Character(Unicode.Scalar(scalar) ?? "\u{FFFD}")).utf8)
            default: decoded.append(bytes[at - 1])
            }
        }
        return decoded
    }

    private func hex4(_ at: Int) -> UInt32 {
        var value: UInt32 = 0
        for k in 0..<4 { value = value << 4 | UInt32(byte(at + k).hexDigitValue ?? 0) }
        return value
    }
}
