/// The exact order of JSON numbers by value, read from their text: no `Double` in between, so that integers past
/// 2^53 (snowflake ids, nanosecond timestamps) and long decimals compare as written. `1`, `1.0` and `10e-1` are
/// equal here (data equality still tells them apart). Exponents are clamped to ±2^53, so numbers past 10^(2^53),
/// or nearer zero than 10^-(2^53), compare as their clamped value: far beyond anything a `Double` holds (the
/// server keeps every real number as one).
///
/// A number is read as its sign, the decimal exponent of its first significant digit (the value is
/// `0.d₁d₂… × 10^exponent`) and its significant digits, which stay in the text (the `.` is skipped as they are
/// read), so that nothing is allocated to compare two numbers.
struct NumberOrder: Sendable {
    /// -1, 0 or 1: the number's sign.
    let sign: Int
    let exponent: Int
    /// The digits from the first significant one to the end of the mantissa (a `.` among them is skipped).
    private let digits: Range<Int>

    /// Exponents are clamped to this magnitude: far beyond any number a `Double` or a decimal library holds, and
    /// far from overflow when the digits' own position is added.
    private static let exponentLimit = 1 << 53

    /// Reads the number at `range` of `text`, which must be a JSON number.
    init(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) {
        var index = range.lowerBound
        let negative = index < range.upperBound && text[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        var mantissaEnd = index
        while mantissaEnd < range.upperBound, text[mantissaEnd] != UInt8(ascii: "e"),
            text[mantissaEnd] != UInt8(ascii: "E")
        {
            mantissaEnd += 1
        }
        // Digits before the point, and where the first significant digit stands among all of them.
        var integerDigits = 0
        var seenPoint = false
        var position = 0
        var first: Int?
        var scan = index
        while scan < mantissaEnd {
            let byte = text[scan]
            if byte == UInt8(ascii: ".") {
                seenPoint = true
            } else {
                if first == nil && byte != UInt8(ascii: "0") { first = scan }
                if first == nil { position += 1 }
                if !seenPoint { integerDigits += 1 }
            }
            scan += 1
        }
        guard let first else {
            sign = 0
            exponent = 0
            digits = mantissaEnd..<mantissaEnd
            return
        }
        sign = negative ? -1 : 1
        exponent = integerDigits - position + Self.explicitExponent(text, mantissaEnd..<range.upperBound)
        digits = first..<mantissaEnd
    }

    /// The value of the `e…` part at `range` (empty: 0), clamped to `exponentLimit`.
    private static func explicitExponent(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int {
        guard range.count > 1 else { return 0 }
        var index = range.lowerBound + 1
        var negative = false
        if text[index] == UInt8(ascii: "-") || text[index] == UInt8(ascii: "+") {
            negative = text[index] == UInt8(ascii: "-")
            index += 1
        }
        var value = 0
        while index < range.upperBound {
            value = min(value * 10 + Int(text[index] &- UInt8(ascii: "0")), exponentLimit)
            index += 1
        }
        return negative ? -value : value
    }

    /// -1, 0 or 1 as the number `a` (read from `aText`) is below, equal to or above `b` (read from `bText`).
    static func compare(
        _ a: NumberOrder, in aText: UnsafeBufferPointer<UInt8>, _ b: NumberOrder, in bText: UnsafeBufferPointer<UInt8>
    ) -> Int {
        guard a.sign == b.sign else { return a.sign < b.sign ? -1 : 1 }
        guard a.sign != 0 else { return 0 }
        let magnitude =
            a.exponent != b.exponent
            ? (a.exponent < b.exponent ? -1 : 1) : compareDigits(a.digits, aText, b.digits, bText)
        return a.sign * magnitude
    }

    /// Compares two runs of significant digits, a missing digit being `0` (trailing zeros are not significant).
    private static func compareDigits(
        _ a: Range<Int>, _ aText: UnsafeBufferPointer<UInt8>, _ b: Range<Int>, _ bText: UnsafeBufferPointer<UInt8>
    ) -> Int {
        var (i, j) = (a.lowerBound, b.lowerBound)
        while true {
            if i < a.upperBound && aText[i] == UInt8(ascii: ".") { i += 1 }
            if j < b.upperBound && bText[j] == UInt8(ascii: ".") { j += 1 }
            let x = i < a.upperBound ? aText[i] : UInt8(ascii: "0")
            let y = j < b.upperBound ? bText[j] : UInt8(ascii: "0")
            if x != y { return x < y ? -1 : 1 }
            if i >= a.upperBound && j >= b.upperBound { return 0 }
            i += 1
            j += 1
        }
    }

    /// Appends the number's order key: bytes whose bytewise order is the numbers' order by value, equal for equal
    /// values, and never a prefix of another's. A class byte (negative, zero, positive); then, unless zero, the
    /// exponent (biased, big-endian) and the significant digits without trailing zeros, ended by `00`; all of it
    /// but the class byte complemented for a negative number, whose order is its magnitude's reversed.
    func appendKey(of text: UnsafeBufferPointer<UInt8>, to key: inout [UInt8]) {
        key.append(UInt8(sign + 1))
        guard sign != 0 else { return }
        let start = key.count
        let biased = UInt64(bitPattern: Int64(exponent)) ^ (1 << 63)
        for shift in stride(from: 56, through: 0, by: -8) { key.append(UInt8(truncatingIfNeeded: biased >> shift)) }
        let digitsStart = key.count
        for index in digits where text[index] != UInt8(ascii: ".") { key.append(text[index]) }
        while key.count > digitsStart, key[key.count - 1] == UInt8(ascii: "0") { key.removeLast() }
        key.append(0)
        if sign < 0 {
            for index in start..<key.count { key[index] = ~key[index] }
        }
    }
}

extension NumberOrder {
    /// -1, 0 or 1 by value, for two number texts.
    static func compare(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> Int {
        let (left, right) = (Array(a), Array(b))
        return left.withUnsafeBufferPointer { x in
            right.withUnsafeBufferPointer { y in
                compare(NumberOrder(x, 0..<x.count), in: x, NumberOrder(y, 0..<y.count), in: y)
            }
        }
    }
}
