extension Config {
    /// Descriptors kept for everything that is not a client connection: stdio, the journal's segments, a
    /// snapshot being written and the one being read, the data directory, each loop's epoll, eventfd and listening
    /// socket, and the log.
    static func reservedDescriptors(threads: Int) -> Int {
        64 + 4 * threads
    }

    /// The limits fitted to `openFiles` descriptors (the process's `RLIMIT_NOFILE`) and `loops` event loops. When
    /// `--max-connections` does not fit, connections are lowered to leave the reserve free, so that a flood of
    /// clients can never keep the journal from opening a segment or a snapshot from being written, and held polls
    /// to leave a twentieth of those connections (at least 16) for other requests, `/healthz` among them. Limits
    /// that fit are kept as given. Returns the fitted configuration and a line for the log when one was lowered.
    func fitted(toOpenFiles openFiles: Int, loops: Int) -> (config: Config, note: String?) {
        let available = max(loops, openFiles - Self.reservedDescriptors(threads: loops))
        guard maxConnections > available else { return (self, nil) }
        var fitted = self
        fitted.maxConnections = available
        fitted.maxHeldPolls = min(maxHeldPolls, max(0, available - max(16, available / 20)))
        return (
            fitted,
            "the open-files limit is \(openFiles): at most \(fitted.maxConnections) connections "
                + "and \(fitted.maxHeldPolls) held polls (--max-connections \(maxConnections), "
                + "--max-held-polls \(maxHeldPolls))"
        )
    }
}
