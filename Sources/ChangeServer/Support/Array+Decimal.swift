extension [UInt8] {
    /// Appends the decimal digits of `value` (0 for a negative one), from the most significant down, so that
    /// nothing is reversed in place afterwards: for the bytes of responses and log lines written by hand.
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
