import Dispatch
import Glibc
import Model

// The request path under libFuzzer: each input is one request, handed to the application as libmicrohttpd hands it
// over (headers screened first, then the whole request), with real storage in a temporary directory. Any answer
// is fine except a crash, a trap, an address-sanitizer report, or a 5xx other than 503; a request that gets no
// answer within five seconds (and is not a held poll) is a failure too. Built by `scripts/fuzz.sh` into the
// ChangeServer module, so it reaches the routes' internals; see the README's "Hardening" section.
//
// Input: a method selector byte, the path up to "\n", header lines "name: value\n" up to an empty line, then the
// body.

/// The application every input goes to, opened once on the data directory `FUZZ_DATA_DIR`.
private let app: App = {
    guard let directory = getenv("FUZZ_DATA_DIR").map({ String(cString: $0) }),
        let config = try? Config.parse(
            arguments: [
                "--data-dir", directory, "--fsync", "never", "--log-level", "critical", "--write-token", "w",
                "--max-collections", "50", "--max-body-bytes", "65536", "--disk-reserve-bytes", "0",
            ], environment: [:]
        ).config,
        let app = try? App.open(config: config, logger: Logger(level: .critical))
    else { fatalError("the fuzzed application could not start") }
    app.startServing()
    return app
}()

private let methods = ["GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS", "PATCH"]

/// Records the one answer (or the hold) a request gets.
private final class FuzzConnection: Connection, @unchecked Sendable {
    // @unchecked: `status` is written once before `done` is signalled and read only after waiting for it.
    private let done = DispatchSemaphore(value: 0)
    private var status: Int?

    func answer(_ response: Response) {
        status = response.status.rawValue
        done.signal()
    }

    func startStream(_ start: StreamStart) {
        status = 200
        done.signal()
    }

    func claimCommit() -> Bool { true }

    var isAbandoned: Bool { false }

    func hold(on subject: FeedSubject, since: Version, timeout: Int, cursor: Int64?) {
        status = 0
        done.signal()
    }

    func wait() -> Int? {
        done.wait(timeout: .now() + 5) == .success ? status : nil
    }
}

private func request(from bytes: UnsafeBufferPointer<UInt8>) -> Request {
    var rest = bytes[...]
    let method = rest.popFirst().map { methods[Int($0) % methods.count] } ?? "GET"
    func line() -> String? {
        guard !rest.isEmpty else { return nil }
        let end = rest.firstIndex(of: 0x0A) ?? rest.endIndex
        let text = String(decoding: rest[rest.startIndex..<end], as: UTF8.self)
        rest = end < rest.endIndex ? rest[(end + 1)...] : rest[rest.endIndex...]
        return text
    }
    let target = line() ?? "/"
    let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
    let query: [(name: String, value: String)] =
        parts.count > 1
        ? parts[1].split(separator: "&").map { pair in
            let halves = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (name: String(halves[0]), value: halves.count > 1 ? String(halves[1]) : "")
        } : []
    var headers: [(name: String, value: String)] = []
    while let header = line(), !header.isEmpty {
        let halves = header.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        headers.append((String(halves[0]), halves.count > 1 ? String(halves[1].drop { $0 == " " }) : ""))
    }
    return Request(method: method, path: String(parts[0]), query: query, headers: headers, body: Array(rest))
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneRequest(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let request = request(from: UnsafeBufferPointer(start: data, count: count))
    let screened = app.screen(request)
    if let refusal = screened.refusal {
        check(refusal.status.rawValue, request)
        return 0
    }
    let connection = FuzzConnection()
    switch app.handle(request, on: connection).result {
    case .respond(let response): check(response.status.rawValue, request)
    // An event stream starts with a 200 and is then fed by the worker's hub, which the harness has none of.
    case .stream: break
    case .later:
        guard let status = connection.wait() else {
            fatalError("no answer within 5 s to \(request.method) \(request.path)")
        }
        check(status, request)
    }
    return 0
}

private func check(_ status: Int, _ request: Request) {
    if status >= 500 && status != 503 { fatalError("\(status) for \(request.method) \(request.path)") }
}
