import Foundation
import Model
import ProcessSupport
import Testing

@testable import ChangeServer

@Suite struct ConfigTests {
    @Test func defaultsMatchTheContract() throws {
        let config = try #require(try Config.parse(arguments: [], environment: [:]).config)
        #expect(config.host == "0.0.0.0")
        #expect(config.port == 8080)
        #expect(config.dataDirectory == "./data")
        #expect(config.fsync == .always)
        #expect(config.maxBodyBytes == 16 << 20)
        #expect(config.history == 1000)
        #expect(config.historyLimits == HistoryLimits(versions: 1000, bytes: 64 << 20))
        #expect(config.writeToken == nil && config.readToken == nil)
        #expect(config.corsOrigins.isEmpty)
        #expect(config.purgeDelaySeconds == 60)
        #expect(config.bodyTimeout == 60 && config.headerTimeout == 60 && config.postgresTimeout == 10)
        #expect(config.maxViews == 100_000 && config.maxCollections == 100_000)
    }

    /// The default (every interface, no token) is warned about at start; a token or a loopback address is not.
    @Test func aServerAnyoneMayChangeIsWarnedAbout() throws {
        func warning(_ arguments: [String], _ environment: [String: String] = [:]) throws -> String? {
            try #require(try Config.parse(arguments: arguments, environment: environment).config).openAccessWarning
        }
        #expect(try warning([])?.contains("anyone who can reach this server on 0.0.0.0") == true)
        for host in ["::", "192.0.2.1", "example.com", "128.0.0.1", "::2", "::ffff:127.0.0.1"] {
            #expect(try warning(["--host", host]) != nil, "\(host)")
        }
        for host in ["127.0.0.1", "127.1.2.3", "localhost", "LOCALHOST", "::1", "0:0:0:0:0:0:0:1"] {
            #expect(try warning(["--host", host]) == nil, "\(host)")
        }
        #expect(try warning(["--write-token", "w"]) == nil)
        #expect(try warning(["--read-token", "r"]) == nil)
        #expect(try warning([], ["CHANGESERVER_WRITE_TOKEN": "w"]) == nil)
    }

    @Test func purgeDelayIsReadFromFlagOrVariable() throws {
        let environment = ["CHANGESERVER_PURGE_DELAY_SECONDS": "5"]
        #expect(try Config.parse(arguments: [], environment: environment).config?.purgeDelaySeconds == 5)
        #expect(
            try Config.parse(arguments: ["--purge-delay-seconds", "0"], environment: environment).config?
                .purgeDelaySeconds
                == 0)
    }

    @Test func bodyTimeoutIsReadFromFlagOrVariable() throws {
        let environment = ["CHANGESERVER_BODY_TIMEOUT": "5"]
        #expect(try Config.parse(arguments: [], environment: environment).config?.bodyTimeout == 5)
        #expect(
            try Config.parse(arguments: ["--body-timeout", "120"], environment: environment).config?.bodyTimeout == 120)
    }

    @Test func headerTimeoutIsReadFromFlagOrVariable() throws {
        let environment = ["CHANGESERVER_HEADER_TIMEOUT": "5"]
        #expect(try Config.parse(arguments: [], environment: environment).config?.headerTimeout == 5)
        #expect(
            try Config.parse(arguments: ["--header-timeout", "1"], environment: environment).config?.headerTimeout == 1)
    }

    /// A misspelled variable left its option unset without a word: `CHANGESERVER_WRITETOKEN` ran a server open to
    /// every writer. A variable of ours that names no option is refused, with the one that was likely meant.
    @Test func anUnknownVariableIsRefused() throws {
        #expect {
            try Config.parse(arguments: [], environment: ["CHANGESERVER_WRITETOKEN": "s3cret"]).config
        } throws: { error in
            "\(error)".contains("unknown variable CHANGESERVER_WRITETOKEN: did you mean CHANGESERVER_WRITE_TOKEN?")
        }
        #expect {
            try Config.parse(arguments: ["--port", "1"], environment: ["CHANGESERVER_PROT": "1"]).config
        } throws: { error in
            "\(error)".contains("unknown variable CHANGESERVER_PROT") && !"\(error)".contains("did you mean")
        }
        #expect(try Config.parse(arguments: [], environment: ["CHANGESERVERX": "1", "OTHER": "2"]).config != nil)
    }

    /// Kubernetes sets these in every pod of a namespace with a Service whose name begins with `changeserver`: not
    /// ours, and `CHANGESERVER_PORT=tcp://…` among them stopped every start behind a Service named `changeserver`.
    @Test func kubernetesServiceLinksAreNotOurs() throws {
        let links = [
            "CHANGESERVER_SERVICE_HOST": "10.0.0.11", "CHANGESERVER_SERVICE_PORT": "80",
            "CHANGESERVER_SERVICE_PORT_HTTP_API": "80", "CHANGESERVER_PORT": "tcp://10.0.0.11:80",
            "CHANGESERVER_PORT_80_TCP": "tcp://10.0.0.11:80", "CHANGESERVER_PORT_80_TCP_PROTO": "tcp",
            "CHANGESERVER_PORT_80_TCP_PORT": "80", "CHANGESERVER_PORT_80_TCP_ADDR": "10.0.0.11",
            "CHANGESERVER_PORT_53_UDP": "udp://10.0.0.11:53", "CHANGESERVER_PORT_9_SCTP_ADDR": "10.0.0.11",
            // A Service named `changeserver-prod`, as Helm names them.
            "CHANGESERVER_PROD_SERVICE_HOST": "10.0.0.12", "CHANGESERVER_PROD_SERVICE_PORT": "8080",
            "CHANGESERVER_PROD_PORT": "tcp://10.0.0.12:8080", "CHANGESERVER_PROD_PORT_8080_TCP_PORT": "8080",
        ]
        let config = try #require(try Config.parse(arguments: [], environment: links).config)
        #expect(config.port == 8080, "the link's port 80 was taken for ours")
        #expect(config.passedOver == ["CHANGESERVER_PORT=tcp://10.0.0.11:80"])
        #expect(try Config.parse(arguments: ["--port", "9000"], environment: links).config?.port == 9000)
        var ours = links
        ours["CHANGESERVER_PORT"] = "9001"
        #expect(try Config.parse(arguments: [], environment: ours).config?.port == 9001)
        for (name, value) in [
            ("CHANGESERVER_PORT_8080_TCP_HOST", "1"), ("CHANGESERVER_PORT_X_TCP", "1"), ("CHANGESERVER_PORT_8080", "1"),
            ("CHANGESERVER_PROD_PORT", "8080"), ("CHANGESERVER_PROD_HOST", "10.0.0.12"),
        ] {
            #expect(throws: Config.UsageError.self, "\(name)") {
                try Config.parse(arguments: [], environment: [name: value]).config
            }
        }
    }

    /// A load balancer that keeps idle connections to its backends longer than the server does may send a request
    /// on one just as the server closes it (a `502` for its client): the idle timeout can be raised to outlast it.
    @Test func idleTimeoutIsReadFromFlagOrVariable() throws {
        #expect(try Config.parse(arguments: [], environment: [:]).config?.idleTimeout == 120)
        let environment = ["CHANGESERVER_IDLE_TIMEOUT": "620"]
        #expect(try Config.parse(arguments: [], environment: environment).config?.idleTimeout == 620)
        #expect(
            try Config.parse(arguments: ["--idle-timeout", "3600"], environment: environment).config?.idleTimeout
                == 3600)
    }

    /// A stalled body or header is answered `408` only while libmicrohttpd keeps the connection: their defaults
    /// follow a shorter idle timeout, and one given longer than it is refused, naming both as they were given.
    @Test func bodyAndHeaderTimeoutsStayWithinTheIdleTimeout() throws {
        let short = try #require(try Config.parse(arguments: ["--idle-timeout", "30"], environment: [:]).config)
        #expect(short.bodyTimeout == 30 && short.headerTimeout == 28)
        let long = try #require(try Config.parse(arguments: ["--idle-timeout", "600"], environment: [:]).config)
        #expect(long.bodyTimeout == 60 && long.headerTimeout == 60)
        let raised = try Config.parse(
            arguments: ["--idle-timeout", "600", "--body-timeout", "300"], environment: [:]
        ).config
        #expect(raised?.bodyTimeout == 300 && raised?.headerTimeout == 60)
        #expect {
            try Config.parse(arguments: ["--body-timeout", "121"], environment: [:]).config
        } throws: { error in
            "\(error)".contains("--body-timeout (121)") && "\(error)".contains("--idle-timeout (120)")
        }
        #expect(try Config.parse(arguments: ["--header-timeout", "118"], environment: [:]).config != nil)
        #expect {
            try Config.parse(arguments: ["--header-timeout", "119"], environment: [:]).config
        } throws: { error in
            "\(error)".contains("--header-timeout (119) must be at most 118, 2 s under --idle-timeout (120)")
        }
        #expect {
            try Config.parse(
                arguments: ["--header-timeout", "40"], environment: ["CHANGESERVER_IDLE_TIMEOUT": "30"]
            ).config
        } throws: { error in
            "\(error)".contains("--header-timeout (40)")
                && "\(error)".contains("at most 28, 2 s under CHANGESERVER_IDLE_TIMEOUT (30)")
        }
    }

    /// libpq reads a string with no `=` as a database name: a URL of another scheme was tried as one, and failed
    /// only after the start's 30 s of patience, with a message about a Unix socket.
    @Test func aPostgresURLOfAnotherSchemeIsRefused() throws {
        for url in [
            "postgresql://u@h/db", "postgres://h/db", "host=h dbname=d", "dbname=d", "changeserver",
            "postgresql:///changeserver?host=/var/run/postgresql", "host=h options=-ctext://x",
        ] {
            #expect(
                try Config.parse(arguments: ["--postgres", url], environment: [:]).config?.postgres == url, "\(url)")
        }
        for url in [
            "notaurl://foo", "mysql://h/db", "postgresq://h/db", "POSTGRESQL://h/db", "postgresq://h/db?sslmode=x",
        ] {
            #expect(throws: Config.UsageError.self, "\(url)") {
                try Config.parse(arguments: ["--postgres", url], environment: [:]).config
            }
        }
    }

    /// A string libpq cannot read failed the same way on every attempt of the start's 30 s of patience; it is
    /// refused at once, with libpq's reason unless that may quote a password.
    @Test func aPostgresStringLibpqCannotReadIsRefusedWithoutItsPassword() throws {
        let reasons = [
            "postgresql://h/db?sslmod=require": #"invalid URI query parameter: "sslmod""#,
            "host=h port": #"missing "=" after "port""#,
            "postgresql://u@[::1/db": "IPv6 host address",
            "postgresql://u:s3cret@[::1/db": "it may quote the password",
            "host=h password=s3cret port": "it may quote the password",
            "postgresql://[::1/db?%70assword=s3cret": "it may quote the password",
            "postgresql://h/db?%70assword=s3cret%zz": "it may quote the password",
        ]
        for (url, reason) in reasons {
            do {
                _ = try Config.parse(arguments: ["--postgres", url], environment: [:]).config
                Issue.record("\(url) was taken")
            } catch {
                #expect(error.description.contains(reason), "\(error)")
                #expect(!error.description.contains("s3cret"), "\(error)")
            }
        }
        let readable = "postgresql://u:s3cret@h:5432/db?sslmode=require&connect_timeout=3"
        #expect(try Config.parse(arguments: ["--postgres", readable], environment: [:]).config?.postgres == readable)
    }

    /// Words are taken in any case, as `--log-level` always took them; a value found wrong is named as it was
    /// given, flag or variable.
    @Test func wordsInAnyCaseAndErrorsNamedAsGiven() throws {
        #expect(try Config.parse(arguments: ["--fsync", "ALWAYS"], environment: [:]).config?.fsync == .always)
        #expect(try Config.parse(arguments: ["--fsync", "Interval"], environment: [:]).config?.fsync == .interval)
        let environment = ["CHANGESERVER_MAX_BODY_MEMORY": "1000"]
        let error = #expect(throws: Config.UsageError.self) {
            _ = try Config.parse(arguments: ["--max-body-bytes", "2000"], environment: environment).config
        }
        #expect(
            error?.description.hasPrefix("CHANGESERVER_MAX_BODY_MEMORY (1000) must be at least --max-body-bytes")
                == true)
    }

    @Test func flagsWinOverEnvironment() throws {
        let environment = [
            "CHANGESERVER_PORT": "9000", "CHANGESERVER_HISTORY": "5", "CHANGESERVER_CORS_ORIGIN": "https://a,https://b",
            "CHANGESERVER_FSYNC": "interval", "CHANGESERVER_HISTORY_BYTES": "1000000",
        ]
        let fromEnvironment = try #require(try Config.parse(arguments: [], environment: environment).config)
        #expect(fromEnvironment.port == 9000)
        #expect(fromEnvironment.history == 5)
        #expect(fromEnvironment.historyLimits == HistoryLimits(versions: 5, bytes: 1_000_000))
        #expect(fromEnvironment.corsOrigins == ["https://a", "https://b"])
        #expect(fromEnvironment.fsync == .interval)
        let both = try #require(
            try Config.parse(
                arguments: ["--port=9001", "--cors-origin", "https://c", "--write-token", "w"], environment: environment
            ).config)
        #expect(both.port == 9001)
        #expect(both.corsOrigins == ["https://c"])
        #expect(both.writeToken == "w")
        #expect(both.history == 5)
    }

    /// An allowed origin is `*` or `scheme://host[:port]`, as browsers send `Origin`: a trailing slash, a path or a
    /// bare host would never match, so it is refused at start, from a flag or from the variable (an empty item too).
    @Test func corsOriginsAreOrigins() throws {
        let good = [
            "*", "https://app.example.com", "http://127.0.0.1:8080", "http://[::1]:3000", "capacitor://localhost",
        ]
        let config = try #require(
            try Config.parse(arguments: good.flatMap { ["--cors-origin", $0] }, environment: [:]).config)
        #expect(config.corsOrigins == good)
        // Written as browsers write them: lowercase, without a default port.
        let written = try Config.parse(
            arguments: ["--cors-origin", "HTTPS://App.Example.com:443", "--cors-origin", "http://A.example:80"],
            environment: [:]
        ).config
        #expect(written?.corsOrigins == ["https://app.example.com", "http://a.example"])
        for bad in ["https://app.example.com/", "app.example.com", "https://", "https://a.example/path", "not a url"] {
            #expect(throws: Config.UsageError.self, "\(bad)") {
                try Config.parse(arguments: ["--cors-origin", bad], environment: [:]).config
            }
        }
        let spaced = try Config.parse(
            arguments: [], environment: ["CHANGESERVER_CORS_ORIGIN": "https://a.com, https://b.com ,http://c"]
        ).config
        #expect(spaced?.corsOrigins == ["https://a.com", "https://b.com", "http://c"])
        for variable in ["", ",", "https://a,,https://b", "https://a/", "https://a, ,https://b"] {
            #expect(throws: Config.UsageError.self, "\(variable)") {
                try Config.parse(arguments: [], environment: ["CHANGESERVER_CORS_ORIGIN": variable]).config
            }
        }
    }

    /// A variable that a flag overrides is not read, so a bad one is no error; one that no flag overrides is.
    @Test func aBadVariableThatAFlagOverridesIsNoError() throws {
        let environment = ["CHANGESERVER_PORT": "abc", "CHANGESERVER_HISTORY": "7"]
        let config = try #require(try Config.parse(arguments: ["--port", "9002"], environment: environment).config)
        #expect(config.port == 9002)
        #expect(config.history == 7)
        #expect {
            try Config.parse(arguments: [], environment: environment).config
        } throws: { error in
            "\(error)".contains("CHANGESERVER_PORT")
        }
    }

    @Test(arguments: [
        ["--bogus"], ["--port"], ["--port", "70000"], ["--port", "x"], ["--fsync", "sometimes"], ["--history", "0"],
        ["--history-bytes", "0"],
        ["--max-body-bytes", "-1"], ["positional"], ["--log-level", "loud"], ["--write-token="],
        ["--purge-delay-seconds", "-1"], ["--purge-delay-seconds", "86401"], ["--body-timeout", "0"],
        ["--body-timeout", "121"], ["--max-views", "0"], ["--header-timeout", "0"], ["--header-timeout", "121"],
        ["--idle-timeout", "19"], ["--idle-timeout", "3601"], ["--body-timeout", "3601"],
        ["--max-held-polls", "0"], ["--postgres-timeout", "0"], ["--postgres-timeout", "3601"], ["--history", "+5"],
    ])
    func badArgumentsAreUsageErrors(_ arguments: [String]) {
        #expect(throws: Config.UsageError.self) { try Config.parse(arguments: arguments, environment: [:]).config }
    }

    /// A token no client can send (a secret file's line break, a space around it) is refused at the start, not
    /// left to refuse every request `401`; a space or a tab inside one can be sent, and is kept.
    @Test func aTokenNoClientCanSendIsRefused() throws {
        for (token, reason) in [
            ("secret\n", "control character"), ("sec\u{0}ret", "control character"), ("sec\rret", "control character"),
            ("secret ", "space"), (" secret", "space"), ("secret\t", "tab"),
        ] {
            #expect {
                try Config.parse(arguments: [], environment: ["CHANGESERVER_WRITE_TOKEN": token]).config
            } throws: { error in
                "\(error)".contains("CHANGESERVER_WRITE_TOKEN") && "\(error)".contains(reason)
            }
            #expect(throws: Config.UsageError.self) {
                try Config.parse(arguments: ["--read-token", token], environment: [:]).config
            }
        }
        #expect(try Config.parse(arguments: ["--read-token", "a b"], environment: [:]).config?.readToken == "a b")
        #expect(try Config.parse(arguments: ["--read-token", "a\tb"], environment: [:]).config?.readToken == "a\tb")
    }

    @Test func addressesAreWrittenAsInAURL() {
        #expect(Listener.address(host: "127.0.0.1", port: 8080) == "127.0.0.1:8080")
        #expect(Listener.address(host: "::1", port: 8080) == "[::1]:8080")
    }

    @Test func helpAndVersionArePrintedInsteadOfServing() throws {
        func printed(_ arguments: [String]) throws -> String? {
            guard case .print(let text) = try Config.parse(arguments: arguments, environment: [:]) else { return nil }
            return text
        }
        #expect(try printed(["--port", "1", "--help"]) == Config.help)
        #expect(try printed(["--version", "--port", "1"]) == "ChangeServer \(Release.version)")
        #expect(Config.help.contains("--version"))
        // The value of a flag is not a flag.
        #expect(
            try Config.parse(arguments: ["--write-token", "--version"], environment: [:]).config?.writeToken
                == "--version")
    }

    @Test func theProgramPrintsItsRelease() throws {
        let run = try ProgramRun.run([ServerProcess.binary.path, "--version"], in: Repository.root, timeout: 30)
        #expect(run.status == 0)
        #expect(run.output == "ChangeServer \(Release.version)\n")
    }

    /// `openapi.yaml` describes this build's contract: its `info.version` is the release `--version` prints.
    @Test func theReleaseIsTheContractsVersion() throws {
        let contract = try String(
            contentsOf: Repository.root.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        let info = try #require(contract.range(of: "\ninfo:\n"))
        let version = try #require(contract[info.upperBound...].range(of: "\n  version: "))
        let line = contract[version.upperBound...].prefix { $0 != "\n" }
        #expect(line == Release.version)
    }

    @Test func processExitsWithStatus2OnUnknownFlagAndPrintsHelp() throws {
        let process = Process()
        process.executableURL = ServerProcess.binary
        process.arguments = ["--no-such-flag"]
        let errors = try Spawning.run(process) {
            let pipe = Pipe()
            process.standardError = pipe
            return pipe
        }
        #expect(waitForExit(of: process, timeout: 10), "the server started despite an unknown flag")
        #expect(process.terminationStatus == 2)
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(message.contains("unknown option '--no-such-flag'"))

        let help = Process()
        help.executableURL = ServerProcess.binary
        help.arguments = ["--help"]
        let output = try Spawning.run(help) {
            let pipe = Pipe()
            help.standardOutput = pipe
            return pipe
        }
        #expect(waitForExit(of: help, timeout: 10), "--help did not exit")
        #expect(help.terminationStatus == 0)
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        for flag in [
            "--host", "--port", "--data-dir", "--fsync", "--max-body-bytes", "--history", "--write-token",
            "--read-token", "--cors-origin",
        ] {
            #expect(text.contains(flag), "\(flag)")
        }
    }
}
