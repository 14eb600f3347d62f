import Foundation
import ProcessSupport
import Testing

/// The feed through the shipped caches (deploy/nginx, deploy/varnish), with real nginx and Varnish started by the
/// node tests of `clients/web/test/cache.test.mjs` in front of the binary this run built: thousands of web
/// clients collapsed into a few origin requests, and event streams passed through unbuffered.
@Suite(.tags(.liveServer, .node)) struct LiveCacheTests {
    @Test func webClientsThroughTheShippedCaches() async throws {
        let result = try await onOwnThread {
            try ProgramRun.run(
                ["node", "--test", "clients/web/test/cache.test.mjs"],
                in: Repository.root,
                environment: ["CF_SERVER_BINARY": ServerProcess.binary.path], timeout: 840)
        }
        #expect(result.status == 0, "node --test failed:\n\(result.output)")
        #expect(result.leftRunning.isEmpty, "node left running: \(result.leftRunning)")
        #expect(!result.output.contains("# skipped 1") && !result.output.contains("SKIP"), "skipped:\n\(result.output)")
    }
}
