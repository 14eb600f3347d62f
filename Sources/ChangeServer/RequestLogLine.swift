/// The request log's line, `<timestamp> info <method> <path> <status> <duration>ms`, written straight into a loop
/// turn's buffer: one call appends a whole line (one exclusive access to the worker's buffer, not one per byte),
/// so that logging every request stays a small part of a small read's cost. The buffer grows as appending grows
/// it (geometrically): reserving room for each line would make it grow by one line at a time.
extension [UInt8] {
    /// Appends one request line after `prefix` (the turn's timestamp and level, with its trailing space). Bytes of
    /// the method and path that could forge a line or a terminal sequence are escaped (`logNeedsEscape`).
    mutating func appendRequestLine(prefix: [UInt8], method: String, path: String, status: Int, milliseconds: Int) {
        append(contentsOf: prefix)
        appendEscapedForLog(method)
        append(UInt8(ascii: " "))
        appendEscapedForLog(path)
        append(UInt8(ascii: " "))
        appendDecimal(status)
        append(UInt8(ascii: " "))
        appendDecimal(milliseconds)
        append(UInt8(ascii: "m"))
        append(UInt8(ascii: "s"))
        append(UInt8(ascii: "\n"))
    }

    fileprivate mutating func appendEscapedForLog(_ text: String) {
        var text = text
        text.withUTF8 { bytes in
            guard bytes.contains(where: logNeedsEscape) else { return append(contentsOf: bytes) }
            for byte in bytes {
                if logNeedsEscape(byte) { append(contentsOf: logEscape(byte)) } else { append(byte) }
            }
        }
    }
}

/// Whether a byte of a request is written escaped in the log.
func logNeedsEscape(_ byte: UInt8) -> Bool {
    byte < 0x20 || byte >= 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
}

/// `\xHH` for a byte.
func logEscape(_ byte: UInt8) -> [UInt8] {
    let digits = Array("0123456789ABCDEF".utf8)
    return [UInt8(ascii: "\\"), UInt8(ascii: "x"), digits[Int(byte >> 4)], digits[Int(byte & 0xF)]]
}

/// Text from a request, escaped as the request log escapes it.
func escapedForLog(_ text: String) -> String {
    var bytes: [UInt8] = []
    bytes.appendEscapedForLog(text)
    return String(decoding: bytes, as: UTF8.self)
}
