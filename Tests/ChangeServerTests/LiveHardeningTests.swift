import Foundation
import ProcessSupport
import Testing

/// Issue 14 against a real server process: what a hostile client or a bad day could do, and now cannot.
@Suite(.tags(.liveServer)) struct LiveHardeningTests {
    /// Kilobytes of a `/proc/<pid>/status` field (`VmRSS`, `VmHWM`).
    func memory(_ server: ServerProcess, _ field: String) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(server.process.processIdentifier)/status", encoding: .utf8))
        let line = status?.split(separator: "\n").first { $0.hasPrefix(field + ":") }
        return line.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
    }

    /// The head of a JSON `PUT` of `path`, with `extra` header lines (each ending in CRLF), as bytes.
    func putHead(_ path: String, _ extra: String) -> [UInt8] {
        Array(("PUT \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra + "\r\n").utf8)
    }

    /// The body memory of the budget tests, and the longest `--body-timeout`: their uploads wait, part sent, while
    /// other steps run, and on a loaded machine such a wait could reach the default 60 s, whose `408` would close
    /// the connection under the test.
    static let budgetFlags = ["--max-body-memory", "1000000", "--max-body-bytes", "800000", "--body-timeout", "120"]
}
