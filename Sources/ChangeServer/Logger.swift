import Glibc

/// The usual log levels, in increasing order of severity.
enum LogLevel: Int, Comparable, Sendable, CaseIterable {
    case trace, debug, info, notice, warning, error, critical

    var name: String { String(describing: self) }

    init?(name: String) {
        guard let level = Self.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = level
    }

    static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One line per event on stderr: `2026-11-29T14:32:19.123Z info message`. Never given bodies or tokens.
struct Logger: Sendable {
    let level: LogLevel

    func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        guard level >= self.level else { return }
        writeToStandardError("\(Self.timestamp()) \(level.name) \(message())\n")
    }

    func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    func error(_ message: @autoclosure () -> String) { log(.error, message()) }

    static func timestamp() -> String {
        var bytes: [UInt8] = []
        appendTimestamp(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the time (now unless given), in UTC, as `2026-12-02T06:55:50.359Z`: written as bytes, since the
    /// request log stamps every loop turn's lines with it.
    static func appendTimestamp(to bytes: inout [UInt8], at time: timespec = now()) {
        var parts = tm()
        var seconds = time.tv_sec
        gmtime_r(&seconds, &parts)
        /// At least `digits` digits, zero-padded; more if the value has them.
        func append(_ value: Int32, digits: Int, then separator: Unicode.Scalar) {
            var divisor: Int32 = 1
            for _ in 1..<digits { divisor *= 10 }
            while divisor <= value / 10 { divisor *= 10 }
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value / divisor % 10))
                divisor /= 10
            }
            bytes.append(UInt8(ascii: separator))
        }
        append(parts.tm_year + 1900, digits: 4, then: "-")
        append(parts.tm_mon + 1, digits: 2, then: "-")
        append(parts.tm_mday, digits: 2, then: "T")
        append(parts.tm_hour, digits: 2, then: ":")
        append(parts.tm_min, digits: 2, then: ":")
        append(parts.tm_sec, digits: 2, then: ".")
        append(Int32(time.tv_nsec / 1_000_000), digits: 3, then: "Z")
    }

    private static func now() -> timespec {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return time
    }
}

/// Hands whole lines to the log's writer thread, so that lines from several threads never interleave and no
/// caller waits for stderr; they are written at once, not collected as request lines are.
func writeToStandardError(_ line: String) {
    LogWriter.standardError.submit(
        Array(line.utf8), lines: line.utf8.reduce(0) { $1 == 0x0A ? $0 + 1 : $0 }, urgent: true)
}
