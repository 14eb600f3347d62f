import Foundation
import ProcessSupport
import Testing

/// The web client and the demo page: the embedded files match `clients/web` and are served openly, the node tests
/// of `changefeed.js` (random histories against a real server) and the browser tests of the demo (headless
/// Chromium driven by Selenium) pass. The last two start their own servers from the binary this run built.
@Suite(.serialized, .tags(.liveServer)) struct LiveWebClientTests {
    static let assets: [(path: String, file: String, type: String)] = [
        ("/", "demo/index.html", "text/html; charset=utf-8"),
        ("/demo", "demo/index.html", "text/html; charset=utf-8"),
        ("/demo/", "demo/index.html", "text/html; charset=utf-8"),
        ("/demo/demo.js", "demo/demo.js", "text/javascript; charset=utf-8"),
        ("/demo/demo.css", "demo/demo.css", "text/css; charset=utf-8"),
        ("/v1/client/changefeed.js", "changefeed.js", "text/javascript; charset=utf-8"),
    ]

    @Test func embeddedFilesAreUpToDateWithClientsWeb() throws {
        let check = try ProgramRun.run(["bash", "scripts/embed-web.sh", "--check"], in: Repository.root, timeout: 30)
        #expect(check.status == 0, "\(check.output)")
    }

    @Test func staticFilesAreServedWithoutTokenAndRevalidated() throws {
        let server = try ServerProcess(["--read-token", "r", "--write-token", "w"])
        for asset in Self.assets {
            let response = try server.client.get(asset.path)
            #expect(response.status == 200, "\(asset.path)")
            #expect(response.header("Content-Type") == asset.type, "\(asset.path)")
            #expect(response.header("Cache-Control") == "no-cache", "\(asset.path)")
            let onDisk = try Data(contentsOf: Repository.root.appendingPathComponent("clients/web/\(asset.file)"))
            #expect(response.body == [UInt8](onDisk), "\(asset.path) differs from clients/web/\(asset.file)")
            let etag = try #require(response.header("ETag"))
            let again = try server.client.request("GET", asset.path, headers: ["If-None-Match": etag])
            #expect(again.status == 304, "\(asset.path)")
        }
        #expect(try server.client.get("/demo/missing.js").status == 404)
        #expect(try server.client.get("/v1/collections").status == 401, "the API still needs its token")
        #expect(try server.client.request("POST", "/demo").status == 405)
    }

    /// In TAP, so that skips are visible: a skipped test or suite is a `# SKIP` line, and a skipped suite's tests
    /// are not counted in `# skipped`. No `--test-force-exit` or `--test-timeout`: Debian 12's node 18 has neither;
    /// `ProgramRun` ends a node that hangs, with what it started.
    @Test(.tags(.node)) func nodeTestsOfTheClientPass() async throws {
        let result = try await onOwnThread {
            try ProgramRun.run(
                ["node", "--test", "--test-reporter=tap", "clients/web/test/changefeed.test.mjs"], in: Repository.root,
                environment: ["CF_SERVER_BINARY": ServerProcess.binary.path], timeout: 300)
        }
        #expect(result.status == 0, "node --test failed:\n\(result.output)")
        #expect(result.leftRunning.isEmpty, "node left running: \(result.leftRunning)")
        #expect(result.output.contains("\n# fail 0\n"), "no TAP summary:\n\(result.output)")
        let skipped = result.output.split(separator: "\n").filter { $0.contains("# SKIP") || $0.contains("# TODO") }
        #expect(skipped.isEmpty, "node skipped tests:\n\(skipped.joined(separator: "\n"))")
    }

    @Test(.tags(.browser)) func browserTestsOfTheDemoPass() async throws {
        let screenshot = NSTemporaryDirectory() + "/changeserver-demo.png"
        let result = try await onOwnThread {
            try ProgramRun.run(
                [TestPython.executable, "-m", "unittest", "-v", "Tests/browser/test_demo.py"], in: Repository.root,
                environment: ["CF_SERVER_BINARY": ServerProcess.binary.path, "CF_SCREENSHOT": screenshot],
                timeout: 300)
        }
        #expect(result.status == 0, "the browser tests failed:\n\(result.output)")
        #expect(result.leftRunning.isEmpty, "the browser tests left running: \(result.leftRunning)")
        #expect(!result.output.contains("skipped"), "the browser tests were skipped:\n\(result.output)")
        #expect(result.output.contains("seed "), "the browser tests did not print their seed:\n\(result.output)")
        #expect(FileManager.default.fileExists(atPath: screenshot))
    }
}
