import Testing

extension Tag {
    /// Starts the `ChangeServer` binary this run built and talks to it over loopback.
    @Tag static var liveServer: Self
}
