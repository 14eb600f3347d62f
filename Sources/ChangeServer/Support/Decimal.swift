/// Decimal digits written by hand, from the most significant down, so that nothing is reversed in place afterwards:
/// for the bytes of responses, JSON and log lines, which would otherwise make a `String` of each number first.
extension [UInt8] {
    /// Appends the decimal digits of `value` (0 for a negative one).
    mutating func appendDecimal(_ value: Int) {
        let value = Swift.max(value, 0)
        var divisor = 1
        while divisor <= value / 10 { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }
}

extension UnsafeMutablePointer<UInt8> {
    /// Writes the decimal digits of `value` into memory counted for them in advance (`decimalDigits`); returns the
    /// position after them.
    func writtenDecimal(_ value: UInt) -> UnsafeMutablePointer<UInt8> {
        let digits = decimalDigits(value)
        var rest = value
        for index in stride(from: digits - 1, through: 0, by: -1) {
            (self + index).initialize(to: UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        }
        return self + digits
    }
}

/// The number of decimal digits of `value`.
func decimalDigits(_ value: UInt) -> Int {
    var digits = 1
    var rest = value
    while rest >= 10 {
        rest /= 10
        digits += 1
    }
    return digits
}
