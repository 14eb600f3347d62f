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
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        var parts = tm()
        var seconds = spec.tv_sec
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let millis = Int(spec.tv_nsec / 1_000_000)
        let fraction = String(millis + 1000).dropFirst()
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(fraction)Z"
    }
}

/// Hands whole lines to the log's writer thread, so that lines from several threads never interleave and no
/// caller waits for stderr; they are written at once, not collected as request lines are.
func writeToStandardError(_ line: String) {
    LogWriter.standardError.submit(
        Array(line.utf8), lines: line.utf8.reduce(0) { $1 == 0x0A ? $0 + 1 : $0 }, urgent: true)
}
