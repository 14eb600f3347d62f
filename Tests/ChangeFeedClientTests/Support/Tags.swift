import Testing

extension Tag {
    /// Starts the `ChangeServer` binary this run built and talks to it over loopback.
    @Tag static var liveServer: Self
}

/// A failure of the tests' own machinery (a server that did not start, an answer of the wrong shape).
struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
