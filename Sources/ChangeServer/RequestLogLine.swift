/// The request lines of one loop turn, `<timestamp> info <method> <path> <status> <duration>ms`, formatted straight
/// into bytes and handed to the log's writer thread together at the end of the turn. One value, so that a line
/// costs the worker one exclusive access, not one per field.
struct RequestLogBatch {
    private(set) var bytes: [UInt8] = []
    private(set) var lines = 0
    /// The turn's timestamp and level, shared by its lines (empty until the first).
    private var prefix: [UInt8] = []

    mutating func add(method: String, path: UnsafeBufferPointer<UInt8>, status: Int, milliseconds: Int) {
        if prefix.isEmpty {
            Logger.appendTimestamp(to: &prefix)
            prefix.append(contentsOf: " info ".utf8)
        }
        bytes.appendRequestLine(prefix: prefix, method: method, path: path, status: status, milliseconds: milliseconds)
        lines += 1
    }

    /// Empties the batch, keeping its memory for the next turn.
    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        lines = 0
        prefix.removeAll(keepingCapacity: true)
    }
}

/// The request log's line, written by one call into a turn's buffer. The buffer grows as appending grows it
/// (geometrically): reserving room for each line would make it grow by one line at a time.
extension [UInt8] {
    /// Appends one request line after `prefix` (the turn's timestamp and level, with its trailing space). Bytes of
    /// the method and path that could forge a line or a terminal sequence are escaped (`logNeedsEscape`).
    mutating func appendRequestLine(
        prefix: [UInt8], method: String, path: UnsafeBufferPointer<UInt8>, status: Int, milliseconds: Int
    ) {
        var method = method
        method.withUTF8 { method in
            guard !method.contains(where: logNeedsEscape), !path.contains(where: logNeedsEscape) else {
                return appendEscapedLine(
                    prefix: prefix, method: method, path: path, status: status, milliseconds: milliseconds)
            }
            // The usual line has nothing to escape: its length is known, and it is written in one pass into a
            // temporary buffer (on the stack unless the path is long), then appended with one copy.
            let status = UInt(Swift.max(status, 0))
            let milliseconds = UInt(Swift.max(milliseconds, 0))
            let length =
                prefix.count + method.count + path.count + decimalDigits(status) + decimalDigits(milliseconds) + 6
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: length) { line in
                guard var cursor = line.baseAddress else { return }
                cursor = cursor.written(prefix)
                cursor = cursor.written(method)
                cursor = cursor.written(UInt8(ascii: " "))
                cursor = cursor.written(path)
                cursor = cursor.written(UInt8(ascii: " "))
                cursor = cursor.writtenDecimal(status)
                cursor = cursor.written(UInt8(ascii: " "))
                cursor = cursor.writtenDecimal(milliseconds)
                cursor = cursor.written(UInt8(ascii: "m"))
                cursor = cursor.written(UInt8(ascii: "s"))
                cursor = cursor.written(UInt8(ascii: "\n"))
                assert(cursor - line.baseAddress.unsafelyUnwrapped == length, "the line's length was counted exactly")
                append(contentsOf: UnsafeBufferPointer(line))
            }
        }
    }

    /// `appendRequestLine` for a line with bytes to escape.
    private mutating func appendEscapedLine(
        prefix: [UInt8], method: UnsafeBufferPointer<UInt8>, path: UnsafeBufferPointer<UInt8>, status: Int,
        milliseconds: Int
    ) {
        append(contentsOf: prefix)
        appendEscapedForLog(method)
        append(UInt8(ascii: " "))
        appendEscapedForLog(path)
        append(UInt8(ascii: " "))
        appendDecimal(status)
        append(UInt8(ascii: " "))
        appendDecimal(milliseconds)
        append(contentsOf: "ms\n".utf8)
    }

    fileprivate mutating func appendEscapedForLog(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard bytes.contains(where: logNeedsEscape) else { return append(contentsOf: bytes) }
        for byte in bytes {
            if logNeedsEscape(byte) { append(contentsOf: logEscape(byte)) } else { append(byte) }
        }
    }
}

extension UnsafeMutablePointer<UInt8> {
    /// Writes `bytes` into the uninitialized memory here; returns the position after them.
    fileprivate func written(_ bytes: UnsafeBufferPointer<UInt8>) -> UnsafeMutablePointer<UInt8> {
        if let base = bytes.baseAddress { initialize(from: base, count: bytes.count) }
        return self + bytes.count
    }

    fileprivate func written(_ bytes: [UInt8]) -> UnsafeMutablePointer<UInt8> {
        bytes.withUnsafeBufferPointer { written($0) }
    }

    fileprivate func written(_ byte: UInt8) -> UnsafeMutablePointer<UInt8> {
        initialize(to: byte)
        return self + 1
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
    var text = text
    var bytes: [UInt8] = []
    text.withUTF8 { bytes.appendEscapedForLog($0) }
    return String(decoding: bytes, as: UTF8.self)
}
