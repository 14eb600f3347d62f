extension UInt8 {
    /// The value of this byte as an ASCII hexadecimal digit (`0`–`9`, `a`–`f`, `A`–`F`), or nil: for `\u` escapes
    /// and `%XX` escapes, in the model's JSON and the server's parsers alike.
    package var hexDigitValue: UInt8? {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): self - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): self - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): self - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
