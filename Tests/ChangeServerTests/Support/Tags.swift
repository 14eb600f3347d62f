import Testing

/// What a test needs beyond the test process, so that a developer can leave the slow ones out. Swift 6.3's
/// `swift test` does not filter by tag, so every suite tagged here also carries `Live` in its name
/// (`swift test --skip Live` runs only the in-process tests); the tags are for IDEs and test reports.
extension Tag {
    /// Starts the `ChangeServer` binary this run built and talks to it over loopback.
    @Tag static var liveServer: Self
    /// Drives headless Chromium (Selenium) against a live server.
    @Tag static var browser: Self
    /// Runs the web client's `node --test` suite against a live server.
    @Tag static var node: Self
    /// Runs the contract tools (openapi-spec-validator, schemathesis).
    @Tag static var contract: Self
}
