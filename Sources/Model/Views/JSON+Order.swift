/// The total order of JSON values that views group by: `null` < `false` < `true` < numbers (by value, exactly:
/// `NumberOrder`) < strings (bytewise UTF-8) < arrays < objects, arrays and objects among themselves by canonical
/// text. Numbers of equal value but different text (`1`, `1.0`) are ordered by their text, so that the order is
/// total on distinct values, as data equality sees them (two sections); sorting, which the contract breaks ties
/// of by item id, takes them as equal (`OrderKey.append(_:of:descending:byText:to:)`).
extension JSON: Comparable {
    /// The order of JSON values of the contract: null < false < true < numbers < strings < arrays < objects.
    public static func < (lhs: JSON, rhs: JSON) -> Bool {
        let (left, right) = (lhs.typeRank, rhs.typeRank)
        guard left == right else { return left < right }
        switch (lhs, rhs) {
        case (.number(let a), .number(let b)):
            let order = NumberOrder.compare(a.utf8, b.utf8)
            return order != 0 ? order < 0 : a.utf8.lexicographicallyPrecedes(b.utf8)
        case (.string(let a), .string(let b)):
            return a.utf8.lexicographicallyPrecedes(b.utf8)
        case (.array, .array), (.object, .object):
            return lhs.canonicalText.lexicographicallyPrecedes(rhs.canonicalText)
        default:
            return false
        }
    }

    /// The rank of the value's type in the order; also the tag of its order key.
    var typeRank: UInt8 {
        switch self {
        case .null: 1
        case .bool(let value): value ? 3 : 2
        case .number: 4
        case .string: 5
        case .array: 6
        case .object: 7
        }
    }
}

/// Order keys: byte strings whose bytewise order is the order of JSON values above, so that an item's whole
/// position in a view (section key, sort keys, id) is one byte string and comparing two positions is one
/// comparison of bytes. A value's key is its type tag, then for a number its value as an order-preserving 64-bit
/// key by value (`NumberOrder.appendKey`), followed by its text where equal values must stay apart, for a string
/// its bytes, for an array or an object its canonical text. Texts are escaped and terminated (`00` becomes
/// `00 FF`, the end is `00 01`) so that no key is a prefix of another: a descending key is then the complement of
/// every byte of the ascending one.
enum OrderKey {
    /// Appends the key of the value at `range` of canonical text `bytes`, or of `null` when `range` is nil;
    /// `byText`: numbers of equal value and different text (`1`, `1.0`) get different keys, ordered by text.
    static func append(
        _ range: Range<Int>?, of bytes: [UInt8], descending: Bool, byText: Bool = true, to key: inout [UInt8]
    ) {
        bytes.withUnsafeBufferPointer { append(range, of: $0, descending: descending, byText: byText, to: &key) }
    }

    /// The same for text read through a buffer pointer.
    static func append(
        _ range: Range<Int>?, of bytes: UnsafeBufferPointer<UInt8>, descending: Bool, byText: Bool = true,
        to key: inout [UInt8]
    ) {
        let start = key.count
        guard let range, !range.isEmpty else {
            key.append(1)
            if descending { complement(&key, from: start) }
            return
        }
        switch bytes[range.lowerBound] {
        case UInt8(ascii: "n"): key.append(1)
        case UInt8(ascii: "f"): key.append(2)
        case UInt8(ascii: "t"): key.append(3)
        case UInt8(ascii: "\""):
            key.append(5)
            let inner = bytes[(range.lowerBound + 1)..<max(range.upperBound - 1, range.lowerBound + 1)]
            if inner.contains(UInt8(ascii: "\\")) {
                appendTerminated(CanonicalScanner(bytes: bytes).decodeString(range), to: &key)
            } else {
                appendTerminated(inner, to: &key)
            }
        case UInt8(ascii: "["):
            key.append(6)
            appendTerminated(bytes[range], to: &key)
        case UInt8(ascii: "{"):
            key.append(7)
            appendTerminated(bytes[range], to: &key)
        default:
            key.append(4)
            NumberOrder(bytes, range).appendKey(of: bytes, to: &key)
            if byText { appendTerminated(bytes[range], to: &key) }
        }
        if descending { complement(&key, from: start) }
    }

    private static func appendTerminated(_ text: some Collection<UInt8>, to key: inout [UInt8]) {
        if text.contains(0) {
            for byte in text {
                key.append(byte)
                if byte == 0 { key.append(0xFF) }
            }
        } else {
            key.append(contentsOf: text)
        }
        key.append(0)
        key.append(1)
    }

    private static func complement(_ key: inout [UInt8], from start: Int) {
        for index in start..<key.count { key[index] = ~key[index] }
    }

    /// Whether `a` sorts before `b`, bytewise (a proper prefix first), eight bytes at a time.
    static func less(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { left in b.withUnsafeBytes { right in less(left, right) } }
    }

    /// The same on raw bytes.
    static func less(_ left: UnsafeRawBufferPointer, _ right: UnsafeRawBufferPointer) -> Bool {
        let common = min(left.count, right.count)
        var at = 0
        while at + 8 <= common {
            let x = UInt64(bigEndian: left.loadUnaligned(fromByteOffset: at, as: UInt64.self))
            let y = UInt64(bigEndian: right.loadUnaligned(fromByteOffset: at, as: UInt64.self))
            if x != y { return x < y }
            at += 8
        }
        while at < common {
            if left[at] != right[at] { return left[at] < right[at] }
            at += 1
        }
        return left.count < right.count
    }

    /// Whether `key` starts with `prefix`.
    static func hasPrefix(_ key: [UInt8], _ prefix: [UInt8]) -> Bool {
        key.count >= prefix.count && key[..<prefix.count].elementsEqual(prefix)
    }
}
