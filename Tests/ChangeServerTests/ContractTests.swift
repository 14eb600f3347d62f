import Foundation
import Testing

/// `openapi.yaml` against the tools of `scripts/requirements-test.txt`: the document is valid OpenAPI 3.1, and
/// schemathesis, driving a live server with requests generated from it, finds no server error and no response
/// whose status, content type, headers or body the document does not describe.
@Suite struct ContractTests {
    /// The package root, found from this file's path (`Tests/ChangeServerTests/ContractTests.swift`).
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static var specification: String { packageRoot.appendingPathComponent("openapi.yaml").path }

    /// The checks schemathesis runs on every response. Left out on purpose: `positive_data_acceptance` and
    /// `negative_data_rejection` (a schema-valid mutation may rightly be `409`/`412`, and `412` rightly wins
    /// over an over-long id), `use_after_free` (a CORS preflight answers from the path alone, by design),
    /// `ignored_auth` (this server runs without tokens; AccessTests cover them).
    static let checks = [
        "not_a_server_error", "status_code_conformance", "content_type_conformance", "response_schema_conformance",
        "response_headers_conformance", "unsupported_method", "allow_header_conformance",
        "ensure_resource_availability", "missing_required_header",
    ]

    @Test func specificationIsValidOpenAPI() throws {
        let result = try Self.run(["python3", "-m", "openapi_spec_validator", Self.specification], timeout: 60)
        #expect(result.status == 0, "openapi-spec-validator rejected openapi.yaml:\n\(result.output)")
        #expect(result.output.contains("OK"), "\(result.output)")
    }

    @Test func liveServerConformsToSpecification() throws {
        let server = try ServerProcess()
        try Self.seed(server.client)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("contract-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let started = Date()
        // Run from a scratch directory: schemathesis keeps a cache in `.schemathesis/` under the current one.
        let result = try Self.run(
            [
                "python3", "-c",
                "import sys; from schemathesis.cli import schemathesis; sys.argv[0] = 'schemathesis'; sys.exit(schemathesis())",
                "--config-file", Self.packageRoot.appendingPathComponent("Tests/contract/schemathesis.toml").path,
                "run", Self.specification, "--url", "http://127.0.0.1:\(server.port)",
                "--checks", Self.checks.joined(separator: ","),
                "--max-examples", "30", "--max-time", "60", "--request-timeout", "15", "--workers", "2",
                "--generation-allow-x00", "false", "--seed", "20261129", "--no-color",
            ], in: scratch, timeout: 150)
        let seconds = Int(Date().timeIntervalSince(started))
        #expect(
            result.status == 0,
            "schemathesis found responses that break openapi.yaml (exit \(result.status), \(seconds) s):\n\(result.output)\nServer log (tail):\n\(server.log.suffix(4000))"
        )
        #expect(result.output.contains("passed"), "\(result.output)")
        #expect(server.process.isRunning, "the server died under schemathesis:\n\(server.log.suffix(4000))")
    }

    /// Collections that the names and ids of `Tests/contract/schemathesis.toml` point at, so that generated
    /// requests reach real data.
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
    }

    /// Runs a command to its end (killed after `timeout` seconds), with standard output and error together.
    static func run(_ arguments: [String], in directory: URL? = nil, timeout: Double) throws -> (
        status: Int32, output: String
    ) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        var environment = ProcessInfo.processInfo.environment
        environment["PYTHONUNBUFFERED"] = "1"
        environment["NO_COLOR"] = "1"
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        watchdog.cancel()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }
}
