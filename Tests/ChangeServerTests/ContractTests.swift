import Foundation
import ProcessSupport
import Testing

/// `openapi.yaml` against the tools of `scripts/requirements-test.txt`: the document is valid OpenAPI 3.1, and
/// schemathesis, driving a live server with requests generated from it, finds no server error and no response
/// whose status, content type, headers or body the document does not describe.
@Suite(.tags(.liveServer, .contract)) struct LiveContractTests {
    static var specification: String { Repository.root.appendingPathComponent("openapi.yaml").path }

    /// The checks schemathesis runs on every response. Left out on purpose: `positive_data_acceptance` and
    /// `negative_data_rejection` (a schema-valid mutation may rightly be `409`/`412`, and `412` rightly wins
    /// over an over-long id), `use_after_free` (a CORS preflight answers from the path alone, by design),
    /// `ignored_auth` (the document makes the token optional, as it is without `--read-token`/`--write-token`;
    /// AccessTests cover the tokens).
    static let checks = [
        "not_a_server_error", "status_code_conformance", "content_type_conformance", "response_schema_conformance",
        "response_headers_conformance", "unsupported_method", "allow_header_conformance",
        "ensure_resource_availability", "missing_required_header",
    ]

    @Test func specificationIsValidOpenAPI() throws {
        let result = try Self.runPython(
            ["-m", "openapi_spec_validator", Self.specification], in: Repository.root, timeout: 60)
        #expect(result.status == 0, "openapi-spec-validator rejected openapi.yaml:\n\(result.output)")
        #expect(result.output.contains("OK"), "\(result.output)")
        #expect(result.leftRunning.isEmpty, "left running: \(result.leftRunning)")
    }

    /// Both servers get twice the default `--connection-memory`: negative generation explodes arrays into dozens of
    /// repeated query arguments (64 bytes of libmicrohttpd's bookkeeping each), and a request line that just fills
    /// the default 8 KiB is closed by libmicrohttpd 0.9.75 without an answer (README, "Errors"), before the server
    /// sees it. schemathesis reports that as a network error; what this test checks is the server's own answers.
    static let connectionMemory = ["--connection-memory", "16384"]

    @Test func liveServerConformsToSpecification() async throws {
        let server = try await ServerProcess.started(Self.connectionMemory)
        try Self.seed(server.client)
        try await Self.schemathesis(against: server, maxExamples: 30, maxTime: 60)
    }

    /// With tokens and a CORS allow-list, and requests that carry no token: every answer but `/healthz` and the
    /// preflights is `401` with `WWW-Authenticate`, and preflights from the allowed origin carry the CORS headers.
    @Test func unauthorizedAnswersConformToSpecification() async throws {
        let server = try await ServerProcess.started(
            [
                "--write-token", "contract-write", "--read-token", "contract-read", "--cors-origin",
                "https://app.example",
            ] + Self.connectionMemory)
        try await Self.schemathesis(
            against: server, maxExamples: 10, maxTime: 30, extra: ["--header", "Origin: https://app.example"])
    }

    /// A request inside every documented limit (the longest name, the longest id) with the headers a browser
    /// ordinarily sends is answered by the server with its JSON, not refused or cut off by the HTTP layer.
    @Test func largestValidRequestsGetJSONAnswers() throws {
        let server = try ServerProcess()
        let name = String(repeating: "n", count: 128)
        let id = String(repeating: "é", count: 128)  // 256 UTF-8 bytes, 768 characters once percent-encoded
        let encodedID = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let path = "/v1/collections/\(name)/items/\(encodedID)"
        let browser = [
            "User-Agent":
                "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
            "Accept": "application/json", "Accept-Language": "en-GB,en;q=0.9", "Accept-Encoding": "gzip, deflate, br",
            "Cookie": "session=" + String(repeating: "c", count: 600),
        ]
        #expect(try server.client.put("/v1/collections/\(name)", ["sections": [["id": "s"]]]).status == 201)
        for (method, expected) in [("PUT", 201), ("GET", 200)] {
            let response: HTTPResponse
            do {
                response =
                    method == "PUT"
                    ? try server.client.put(path, ["data": 1], headers: browser)
                    : try server.client.get(path, headers: browser)
            } catch {
                Issue.record("\(method) of a \(path.utf8.count)-byte valid path with browser headers: \(error)")
                continue
            }
            #expect(response.status == expected, "\(method): \(response.status) \(response.headers) \(response.text)")
            #expect(response.header("Content-Type") == "application/json; charset=utf-8", "\(method): \(response.text)")
        }
        let health = try server.client.get("/healthz", headers: browser)
        #expect(health.status == 200, "\(health.status) \(health.headers) \(health.text)")
    }

    /// Runs schemathesis against `server` and records an issue, with its report, unless every check passed.
    static func schemathesis(
        against server: ServerProcess, maxExamples: Int, maxTime: Int, extra: [String] = []
    ) async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("contract-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let started = Date()
        // Run from a scratch directory: schemathesis keeps a cache in `.schemathesis/` under the current one.
        let arguments =
            [
                "-c", schemathesisLauncher,
                "--config-file", Repository.root.appendingPathComponent("Tests/contract/schemathesis.toml").path,
                "run", specification, "--url", "http://127.0.0.1:\(server.port)",
                "--checks", checks.joined(separator: ","),
                "--max-examples", "\(maxExamples)", "--max-time", "\(maxTime)", "--request-timeout", "15",
                "--workers", "2", "--generation-allow-x00", "false", "--seed", "20261129", "--no-color",
            ] + extra
        let result = try await onOwnThread { try runPython(arguments, in: scratch, timeout: Double(maxTime + 90)) }
        let seconds = Int(Date().timeIntervalSince(started))
        #expect(
            result.status == 0,
            "schemathesis found responses that break openapi.yaml (exit \(result.status.map { "\($0)" } ?? "none: killed"), \(seconds) s):\n\(result.output)\nServer log (tail):\n\(server.log.suffix(4000))"
        )
        #expect(result.output.contains("passed"), "\(result.output)")
        #expect(result.leftRunning.isEmpty, "schemathesis left running: \(result.leftRunning)")
        #expect(server.process.isRunning, "the server died under schemathesis:\n\(server.log.suffix(4000))")
    }

    /// Starts schemathesis's command line with `ast.parse` serialized. CPython 3.11 keeps the AST constructor's
    /// recursion depth in state shared by all threads, so two threads parsing at once can fail with "SystemError:
    /// AST constructor recursion depth mismatch"; hypothesis parses the sources of lambdas from schemathesis's
    /// worker threads (`--workers 2`), which made the run fail now and then without any finding.
    static let schemathesisLauncher = """
        import ast, sys, threading
        parse, lock = ast.parse, threading.Lock()
        def serialized_parse(*arguments, **options):
            with lock:
                return parse(*arguments, **options)
        ast.parse = serialized_parse
        from schemathesis.cli import schemathesis
        sys.argv[0] = 'schemathesis'
        sys.exit(schemathesis())
        """

    /// Collections and views that the names and ids of `Tests/contract/schemathesis.toml` point at, so that
    /// generated requests reach real data.
    static func seed(_ client: Client) throws {
        let inbox: [String: Any] = [
            "sections": [
                [
                    "id": "today", "data": ["title": "Today"],
                    "items": [["id": "m1", "data": ["text": "hi"]], ["id": "m2", "data": ["text": "lunch?"]]],
                ],
                [
                    "id": "later", "data": ["title": "Later"],
                    "items": [["id": "a/b é", "data": [1, 2.5, true, NSNull()]]],
                ],
            ]
        ]
        let archive: [String: Any] = ["sections": [["id": "old", "items": [["id": "m3"]]]]]
        for (name, body) in [("inbox", inbox), ("archive", archive), ("empty", ["sections": []])] {
            let response = try client.put("/v1/collections/\(name)", body)
            #expect(response.status == 201, "seeding \(name): \(response.text)")
        }
        let version = try #require(client.get("/v1/collections/inbox").object["version"] as? String)
        let mutation = try client.mutate(
            "inbox", [["op": "moveItem", "item": "m2", "to": ["later", 0]]], headers: ["If-Match": "\"\(version)\""])
        #expect(mutation.status == 200, "\(mutation.text)")
        // Views under the same names (a separate namespace): one sectioned and sorted, one filtered and limited.
        let views: [(String, [String: Any])] = [
            (
                "inbox",
                ["source": "inbox", "sectionBy": ["field": "/text"], "sortBy": [["field": "", "order": "desc"]]]
            ),
            ("archive", ["source": "archive", "filter": ["not": ["field": "/x", "exists": true]], "limit": 1]),
        ]
        for (name, definition) in views {
            let response = try client.put("/v1/views/\(name)", definition)
            #expect(response.status == 201, "defining the view \(name): \(response.text)")
        }
    }

    /// Runs a Python program to its end (killed, with what it started, after `timeout` seconds).
    static func runPython(_ arguments: [String], in directory: URL, timeout: Double) throws -> ProgramRun {
        try ProgramRun.run(
            [TestPython.executable] + arguments, in: directory,
            environment: ["PYTHONUNBUFFERED": "1", "NO_COLOR": "1"], timeout: timeout)
    }
}
