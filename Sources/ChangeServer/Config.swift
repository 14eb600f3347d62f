import Glibc
import Model

/// How the server runs: every flag of `--help`, each with an environment fallback (`--max-body-bytes` reads
/// `CHANGESERVER_MAX_BODY_BYTES`). A flag on the command line wins over its environment variable.
struct Config: Sendable {
    enum FsyncPolicy: String, Sendable, CaseIterable {
        /// A mutation is answered only once it is on disk (group commit shares one fsync among concurrent writers).
        case always
        /// Written at once, fsynced every 100 ms: a crash of the machine may lose the last 100 ms.
        case interval
        /// Never fsynced: for tests and caches.
        case never
    }

    var host = "0.0.0.0"
    var port = 8080
    var dataDirectory = "./data"
    /// `--postgres`: the journal and snapshots live in this PostgreSQL database instead of `dataDirectory`.
    var postgres: String?
    /// `--postgres-timeout`: seconds a commit may go unanswered before the store is taken as down.
    var postgresTimeout = 10
    var fsync = FsyncPolicy.always
    var maxBodyBytes = 16 << 20
    var history = 1000
    /// `--history-bytes`: about how many bytes of changes each collection's (and view's) history keeps at most.
    var historyBytes = 64 << 20
    var writeToken: String?
    var readToken: String?
    var corsOrigins: [String] = []
    var snapshotBytes = 64 << 20
    /// `--purge-delay-seconds`: with `--postgres`, how long a deleted collection's records stay in the database.
    var purgeDelaySeconds = 60
    var maxHeldPolls = 20_000
    /// Whether `--max-held-polls` was given: then it is kept as given (up to `--max-connections`), without the
    /// reserve of connections for other requests that the default leaves (`fitted`).
    var maxHeldPollsIsExplicit = false
    var maxConnections = 30_000
    var connectionMemory = 8192
    var maxConnectionsPerAddress = 0
    var maxBodyMemory = 256 << 20
    /// Whether `--max-body-memory` was given: then it is kept as given, not fitted to a memory limit (`fitted`).
    var maxBodyMemoryIsExplicit = false
    /// `--max-response-memory`: bytes of answers over 1 MiB held until their clients take them (`ResponseBytes`).
    var maxResponseMemory = 1 << 30
    /// Whether `--max-response-memory` was given (as `maxBodyMemoryIsExplicit`).
    var maxResponseMemoryIsExplicit = false
    /// `--idle-timeout`: seconds a connection may show no activity (an idle keep-alive connection, a client that
    /// reads nothing) before libmicrohttpd closes it without an answer.
    var idleTimeout = 120
    /// `--body-timeout`: seconds a request body may go without a byte arriving before it is answered `408`.
    var bodyTimeout = 60
    /// `--header-timeout`: seconds a request's headers may take to arrive, from their first byte seen.
    var headerTimeout = 60
    var maxCollections = 100_000
    var maxViews = 100_000
    var diskReserveBytes = 256 << 20
    /// Variables of ours that held a Kubernetes service link (`isServiceLink`), passed over: logged at start.
    var passedOver: [String] = []
    /// Event loops; nil: one per CPU the process may use (`CPUBudget`).
    var threads: Int?
    var logLevel = LogLevel.info

    /// Whether `url` begins with a URI scheme libpq does not take: it takes `postgresql://` and `postgres://`, in
    /// these letters exactly, and reads any other string as `key=value` pairs or, with no `=`, as a database name,
    /// so a typo in the scheme (`POSTGRESQL://`, `postgresq://h/db?sslmode=require`) or another scheme was tried as
    /// one, and failed only after the start's 30 s of patience, with a message about a socket.
    static func isForeignURL(_ url: String) -> Bool {
        guard let separator = url.range(of: "://") else { return false }
        let scheme = Substring(url[..<separator.lowerBound])
        // RFC 3986 §3.1: a letter, then letters, digits, `+`, `-` and `.`.
        let isScheme =
            scheme.first.map { $0.isASCII && $0.isLetter } == true
            && scheme.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }
        return isScheme && scheme != "postgresql" && scheme != "postgres"
    }

    /// What each collection's and view's history keeps: `--history` versions within about `--history-bytes`.
    var historyLimits: HistoryLimits { HistoryLimits(versions: history, bytes: historyBytes) }

    /// What a command line asks: to serve, or to print a text (`--help`, `--version`) and exit.
    enum Invocation {
        case serve(Config)
        case print(String)

        /// The configuration to serve with; nil when a text is to be printed.
        var config: Config? {
            guard case .serve(let config) = self else { return nil }
            return config
        }
    }

    /// Why the command line could not be read: printed with a hint, exit status 2.
    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    /// What `--help` prints.
    static let help = """
        Usage: ChangeServer [options]

        Holds named sectioned collections and live views of them, applies mutations over REST, and pushes
        UIKit-ready changesets to subscribers by HTTP long-polling or server-sent events. Each option can also be
        set by the environment variable in brackets.

          --host HOST            address to listen on (default 0.0.0.0) [CHANGESERVER_HOST]
          --port PORT            TCP port, 0 for any free port (default 8080) [CHANGESERVER_PORT]
          --data-dir DIR         where the journal and snapshots live (default ./data) [CHANGESERVER_DATA_DIR]
          --postgres URL         keep the journal and snapshots in PostgreSQL (libpq URI or "key=value" string), shared
                                 by every server on it; --data-dir and --fsync are then unused [CHANGESERVER_POSTGRES]
          --postgres-timeout SECONDS
                                 with --postgres, a commit the database leaves unanswered this long (plus a second
                                 per MB of records) takes the store down: mutations get 503 until it answers
                                 (default 10, at most 3600) [CHANGESERVER_POSTGRES_TIMEOUT]
          --fsync POLICY         always (default: answer once on disk), interval (every 100 ms), never [CHANGESERVER_FSYNC]
          --max-body-bytes N     largest request body, larger ones get 413 (default 16777216) [CHANGESERVER_MAX_BODY_BYTES]
          --history N            versions kept per collection for the change feed (default 1000) [CHANGESERVER_HISTORY]
          --history-bytes N      about how many bytes of changes the history of each collection or view keeps, within
                                 --history; older versions leave it first (default 67108864) [CHANGESERVER_HISTORY_BYTES]
          --snapshot-bytes N     journal bytes after which a snapshot compacts it (default 67108864) [CHANGESERVER_SNAPSHOT_BYTES]
          --purge-delay-seconds N
                                 with --postgres, seconds before a deleted collection's records leave the database
                                 (default 60) [CHANGESERVER_PURGE_DELAY_SECONDS]
          --write-token TOKEN    mutations need "Authorization: Bearer TOKEN"; it also allows reads [CHANGESERVER_WRITE_TOKEN]
          --read-token TOKEN     reads need "Authorization: Bearer TOKEN" (or the write token); without --write-token,
                                 writes need it too [CHANGESERVER_READ_TOKEN]
          --cors-origin ORIGIN   an origin allowed to call from a browser; repeatable [CHANGESERVER_CORS_ORIGIN, comma-separated, spaces ignored]
          --max-held-polls N     long polls and event streams held at once, at least 1; more get 429 (default 20000) [CHANGESERVER_MAX_HELD_POLLS]
          --max-connections N    open connections at once (default 30000) [CHANGESERVER_MAX_CONNECTIONS]
          --connection-memory N  bytes per connection for request and response headers; larger headers get 431
                                 (default 8192: headers up to about 7.5 KB; 2560 keeps a held poll under 4 KiB and
                                 lets about 2 KB fit) [CHANGESERVER_CONNECTION_MEMORY]
          --threads N            event loops serving HTTP (default: one per CPU the process may use: its affinity
                                 and its cgroup's CPU quota) [CHANGESERVER_THREADS]
          --max-connections-per-address N
                                 open connections from one client address per event loop, 0 for no limit (default 0) [CHANGESERVER_MAX_CONNECTIONS_PER_ADDRESS]
          --max-body-memory N    bytes of request bodies held at once by all connections; a body that does not fit gets 503; at least --max-body-bytes (default 268435456, or a sixteenth of a container's memory limit if less, or --max-body-bytes if larger) [CHANGESERVER_MAX_BODY_MEMORY]
          --max-response-memory N
                                 bytes of answers over 1 MiB held at once until their clients have taken them; a
                                 GET whose answer does not fit gets 503 (one larger than N goes when no other is
                                 held) (default 1073741824, or an eighth of a container's memory limit if less)
                                 [CHANGESERVER_MAX_RESPONSE_MEMORY]
          --idle-timeout SECONDS a connection with no activity this long (an idle keep-alive connection, a client
                                 that reads nothing) is closed without an answer; keep it longer than the idle
                                 timeout of a load balancer in front, 20 to 3600 (default 120) [CHANGESERVER_IDLE_TIMEOUT]
          --body-timeout SECONDS a request whose body stalls this long (no byte arrives) gets 408, and its connection
                                 is closed (default 60, or --idle-timeout if shorter; at most --idle-timeout)
                                 [CHANGESERVER_BODY_TIMEOUT]
          --header-timeout SECONDS
                                 a request whose headers are not all in this long after their first bytes gets 408,
                                 and its connection is closed (default 60, or --idle-timeout minus 2 if shorter;
                                 at most that) [CHANGESERVER_HEADER_TIMEOUT]
          --max-collections N    collections at once; creating one more gets 409 (default 100000) [CHANGESERVER_MAX_COLLECTIONS]
          --max-views N          views at once; defining one more gets 409 (default 100000) [CHANGESERVER_MAX_VIEWS]
          --disk-reserve-bytes N free space kept in --data-dir for snapshots: below it writes get 503; unused with --postgres (default 268435456) [CHANGESERVER_DISK_RESERVE_BYTES]
          --log-level LEVEL      trace, debug, info (default), notice, warning, error, critical [CHANGESERVER_LOG_LEVEL]
          --help                 print this help and exit
          --version              print the release and exit
        """

    private static let valued: Set<String> = [
        "host", "port", "data-dir", "fsync", "max-body-bytes", "history", "history-bytes", "snapshot-bytes",
        "write-token", "read-token",
        "cors-origin", "postgres", "postgres-timeout",
        "max-held-polls", "max-connections", "connection-memory", "threads", "log-level",
        "max-connections-per-address", "max-body-memory", "max-response-memory", "max-collections",
        "disk-reserve-bytes",
        "purge-delay-seconds", "body-timeout", "header-timeout", "idle-timeout", "max-views",
    ]

    /// Reads the arguments (without the program name), then the environment for the options the arguments do not
    /// give: a flag wins over its variable, and a bad variable that a flag overrides is not an error. `--help` and
    /// `--version` ask for their text, whatever comes after them (a flag before them is still read: an unknown one
    /// is refused, and `--port --version` gives `--port` the value "--version").
    static func parse(arguments: [String], environment: [String: String]) throws(UsageError) -> Invocation {
        var given: [(name: String, value: String)] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--help" || argument == "-h" { return .print(help) }
            if argument == "--version" { return .print("ChangeServer \(Release.version)") }
            guard argument.hasPrefix("--") else { throw UsageError(description: "unexpected argument '\(argument)'") }
            var name = String(argument.dropFirst(2))
            var value: String?
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard valued.contains(name) else { throw UsageError(description: "unknown option '--\(name)'") }
            if value == nil {
                guard index < arguments.count else { throw UsageError(description: "--\(name) needs a value") }
                value = arguments[index]
                index += 1
            }
            given.append((name, value ?? ""))
        }
        // A misspelled variable was ignored without a word: `CHANGESERVER_WRITETOKEN` left the server open to every
        // writer. Every variable of ours must name an option, as every flag must.
        let variables = Dictionary(uniqueKeysWithValues: valued.map { (Self.variable(of: $0), $0) })
        let unknown = environment.keys.filter {
            $0.hasPrefix("CHANGESERVER_") && variables[$0] == nil && !Self.isServiceLink($0, environment[$0])
        }
        for variable in unknown.sorted() {
            let squeezed = variable.replacingOccurrences(of: "_", with: "")
            let meant = variables.keys.first { $0.replacingOccurrences(of: "_", with: "") == squeezed }
            throw UsageError(
                description: "unknown variable \(variable)" + (meant.map { ": did you mean \($0)?" } ?? "")
                    + " (every CHANGESERVER_ variable names an option; see --help)")
        }
        var config = Config()
        for (name, value) in given { try config.set(name, value, from: "--\(name)") }
        let onCommandLine = Set(given.map(\.name))
        for name in valued.sorted() where !onCommandLine.contains(name) {
            let variable = Self.variable(of: name)
            guard let value = environment[variable] else { continue }
            if Self.isServiceLink(variable, value) {
                config.passedOver.append("\(variable)=\(value)")
                continue
            }
            if name == "cors-origin" {
                // An empty item is refused, as an empty flag is: `""` or `a,,b` would otherwise allow less than meant.
                // Spaces around an item are not part of it (`https://a.com, https://b.com`).
                for origin in value.split(separator: ",", omittingEmptySubsequences: false) {
                    try config.set(name, String(origin).trimmingSpaces(), from: variable)
                }
            } else {
                try config.set(name, value, from: variable)
            }
        }
        // A body larger than all the memory for bodies would be refused `503 server_busy` ("retry shortly") for good:
        // the default grows with `--max-body-bytes`, and a smaller one given is refused.
        if !config.maxBodyMemoryIsExplicit { config.maxBodyMemory = max(config.maxBodyMemory, config.maxBodyBytes) }
        func isInEnvironment(_ name: String) -> Bool { environment[Self.variable(of: name)] != nil }
        /// Named as the operator gave them: a flag, or its variable.
        func source(of name: String) -> String {
            !onCommandLine.contains(name) && isInEnvironment(name) ? Self.variable(of: name) : "--\(name)"
        }
        guard config.maxBodyMemory >= config.maxBodyBytes else {
            throw UsageError(
                description:
                    "\(source(of: "max-body-memory")) (\(config.maxBodyMemory)) must be at least "
                    + "\(source(of: "max-body-bytes")) (\(config.maxBodyBytes)): a body that large could never be "
                    + "taken")
        }
        // A stalled body or header is answered `408` only if libmicrohttpd has not closed the connection first: the
        // defaults follow a shorter `--idle-timeout`, and a longer one given is refused. Headers are looked at once
        // a second (`HTTPServer+SlowHeaders`), so theirs must end 2 s before the idle timeout: at 19 of 20 the
        // idle close came first every time.
        let idle = "\(source(of: "idle-timeout")) (\(config.idleTimeout))"
        let bounds = [
            (
                "body-timeout", \Config.bodyTimeout, config.idleTimeout,
                "at most \(idle): libmicrohttpd closes a silent connection at the idle timeout, without an answer"
            ),
            (
                "header-timeout", \Config.headerTimeout, config.idleTimeout - 2,
                "at most \(config.idleTimeout - 2), 2 s under \(idle): headers are looked at once a second, and "
                    + "libmicrohttpd closes a silent connection at the idle timeout, without an answer"
            ),
        ]
        for (name, timeout, bound, reason) in bounds where config[keyPath: timeout] > bound {
            guard onCommandLine.contains(name) || isInEnvironment(name) else {
                config[keyPath: timeout] = bound
                continue
            }
            throw UsageError(
                description:
                    "\(source(of: name)) (\(config[keyPath: timeout])) must be \(reason); lower it or raise "
                    + "\(source(of: "idle-timeout"))")
        }
        return .serve(config)
    }

    /// Whether a variable is one Kubernetes sets in every pod of a namespace with a Service whose name begins with
    /// `changeserver` (service links, named after the Service in capitals, `_` for `-`: `changeserver-prod` makes
    /// `CHANGESERVER_PROD_…`): `<S>_SERVICE_HOST`, `<S>_SERVICE_PORT[_<port name>]`,
    /// `<S>_PORT_<port>_<protocol>[_PROTO|_PORT|_ADDR]`, and `<S>_PORT` as `tcp://<address>:<port>`, which for a
    /// Service named `changeserver` is our own `CHANGESERVER_PORT`. They are not ours: that one stopped every start
    /// behind such a Service (`must be an integer`), and refusing the others as unknown did the same.
    static func isServiceLink(_ name: String, _ value: String?) -> Bool {
        let parts = name.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0] == "CHANGESERVER" else { return false }
        let last = parts.count - 1
        if parts[last] == "PORT", let value = value?.lowercased(),
            ["tcp://", "udp://", "sctp://"].contains(where: { value.hasPrefix($0) })
        {
            return true
        }
        if parts[last - 1] == "SERVICE" && parts[last] == "HOST" { return true }
        if let service = parts.dropFirst().firstIndex(of: "SERVICE"), service < last, parts[service + 1] == "PORT" {
            return true
        }
        let protocolIndex = ["PROTO", "PORT", "ADDR"].contains(parts[last]) ? last - 1 : last
        guard protocolIndex >= 3, ["TCP", "UDP", "SCTP"].contains(parts[protocolIndex]) else { return false }
        let port = parts[protocolIndex - 1]
        return parts[protocolIndex - 2] == "PORT" && !port.isEmpty && port.allSatisfy { ("0"..."9").contains($0) }
    }

    /// The environment variable of an option: `CHANGESERVER_` and its name in capitals, `_` for `-`.
    private static func variable(of name: String) -> String {
        "CHANGESERVER_" + String(name.uppercased().map { $0 == "-" ? "_" : $0 })
    }

    /// `scheme://host[:port]`, as a browser writes an `Origin`: a scheme of letters, digits, `+`, `-` and `.`
    /// after a letter, then a host (and port) of visible ASCII with no `/`, `?`, `#` or `@`.
    static func isOrigin(_ value: String) -> Bool {
        guard let separator = value.range(of: "://") else { return false }
        let scheme = value[..<separator.lowerBound].utf8
        let host = value[separator.upperBound...].utf8
        let letters = UInt8(ascii: "a")...UInt8(ascii: "z")
        let digits = UInt8(ascii: "0")...UInt8(ascii: "9")
        guard let first = scheme.first, letters.contains(first | 0x20) else { return false }
        return scheme.allSatisfy { letters.contains($0 | 0x20) || digits.contains($0) || "+-.".utf8.contains($0) }
            && !host.isEmpty && host.allSatisfy { $0 > 0x20 && $0 < 0x7F && !"/?#@".utf8.contains($0) }
    }

    /// An origin as browsers write it in `Origin`, which is compared byte for byte: lowercase, without the scheme's
    /// default port (`HTTPS://App.Example.com:443` is `https://app.example.com`).
    static func serialized(origin: String) -> String {
        let lowercase = origin.lowercased()
        for (scheme, port) in [("http://", ":80"), ("https://", ":443")]
        where lowercase.hasPrefix(scheme) && lowercase.hasSuffix(port) {
            return String(lowercase.dropLast(port.count))
        }
        return lowercase
    }

    private mutating func set(_ name: String, _ value: String, from source: String) throws(UsageError) {
        func integer(_ range: ClosedRange<Int>) throws(UsageError) -> Int {
            // Decimal digits alone (a `-` for a negative number): `Int` also takes `+5`.
            guard !value.hasPrefix("+"), let number = Int(value), range.contains(number) else {
                throw UsageError(
                    description:
                        "\(source) must be an integer from \(range.lowerBound) to \(range.upperBound), not '\(value)'")
            }
            return number
        }
        func nonEmpty() throws(UsageError) -> String {
            guard !value.isEmpty else { throw UsageError(description: "\(source) must not be empty") }
            return value
        }
        /// A token a client can send: a header's value carries no control character but the tab, and the server
        /// trims the spaces and tabs around the one it is sent. A secret file written with `echo` ends with a line
        /// break, and with it every request would be refused `401`.
        func token() throws(UsageError) -> String {
            let token = try nonEmpty()
            if token.utf8.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
                throw UsageError(
                    description:
                        "\(source) holds a control character (often a line break at its end, as a file written with "
                        + "echo has), which no client can send in a header: remove it")
            }
            let blank: (UInt8?) -> Bool = { $0 == 0x20 || $0 == 0x09 }
            if blank(token.utf8.first) || blank(token.utf8.last) {
                throw UsageError(
                    description:
                        "\(source) starts or ends with a space or a tab, which a header's value loses on the way: "
                        + "remove it")
            }
            return token
        }
        switch name {
        case "host": host = try nonEmpty()
        case "port": port = try integer(0...65535)
        case "data-dir": dataDirectory = try nonEmpty()
        case "postgres":
            let url = try nonEmpty()
            guard !Self.isForeignURL(url) else {
                throw UsageError(
                    description: "\(source) must be a postgresql:// or postgres:// URL or a key=value string")
            }
            if let problem = PGConnection.unreadable(url) {
                throw UsageError(description: "\(source) cannot be read: \(problem)")
            }
            postgres = url
        case "postgres-timeout": postgresTimeout = try integer(1...3600)
        case "fsync":
            guard let policy = FsyncPolicy(rawValue: value.lowercased()) else {
                throw UsageError(description: "\(source) must be always, interval or never, not '\(value)'")
            }
            fsync = policy
        case "max-body-bytes": maxBodyBytes = try integer(1...(1 << 30))
        case "history": history = try integer(1...1_000_000)
        case "history-bytes": historyBytes = try integer(1...(1 << 40))
        case "snapshot-bytes": snapshotBytes = try integer(1...(1 << 40))
        case "purge-delay-seconds": purgeDelaySeconds = try integer(0...86_400)
        case "write-token": writeToken = try token()
        case "read-token": readToken = try token()
        case "cors-origin":
            // Browsers send `Origin` as `scheme://host[:port]`: anything else (a trailing slash, a path, a bare
            // host) would never match, and every cross-origin call would fail without a word.
            guard value == "*" || Self.isOrigin(value) else {
                throw UsageError(
                    description:
                        "\(source) must be * or an origin such as https://app.example.com (scheme://host[:port], no "
                        + "path or trailing slash), not '\(value)'")
            }
            corsOrigins.append(Self.serialized(origin: value))
        case "max-held-polls":
            // 0 would refuse every poll and stream `429` ("retry shortly") for good.
            maxHeldPolls = try integer(1...1_000_000)
            maxHeldPollsIsExplicit = true
        case "max-connections": maxConnections = try integer(1...1_000_000)
        case "connection-memory": connectionMemory = try integer(1024...(1 << 20))
        case "max-connections-per-address": maxConnectionsPerAddress = try integer(0...1_000_000)
        case "max-body-memory":
            maxBodyMemory = try integer(1...(1 << 40))
            maxBodyMemoryIsExplicit = true
        case "max-response-memory":
            maxResponseMemory = try integer(1...(1 << 40))
            maxResponseMemoryIsExplicit = true
        case "body-timeout": bodyTimeout = try integer(1...3600)
        case "header-timeout": headerTimeout = try integer(1...3600)
        // Above the 15 s heartbeat of event streams, whose connections are otherwise quiet.
        case "idle-timeout": idleTimeout = try integer(20...3600)
        case "max-collections": maxCollections = try integer(1...100_000_000)
        case "max-views": maxViews = try integer(1...100_000_000)
        case "disk-reserve-bytes": diskReserveBytes = try integer(0...(1 << 50))
        case "threads": threads = try integer(1...64)
        case "log-level":
            guard let level = LogLevel(name: value) else {
                let names = LogLevel.allCases.map(\.name).joined(separator: ", ")
                throw UsageError(description: "\(source) must be one of \(names), not '\(value)'")
            }
            logLevel = level
        default: throw UsageError(description: "unknown option '--\(name)'")
        }
    }
}
