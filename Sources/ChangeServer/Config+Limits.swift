extension Config {
    /// Descriptors kept for everything that is not a client connection: stdio, the journal's segments, a
    /// snapshot being written and the one being read, the data directory, each loop's epoll, eventfd and listening
    /// socket, and the log.
    static func reservedDescriptors(threads: Int) -> Int {
        64 + 4 * threads
    }

    /// The limits fitted to `openFiles` descriptors (the process's `RLIMIT_NOFILE`) and `loops` event loops:
    /// connections leave the reserve free, so that a flood of clients can never keep the journal from opening a
    /// segment or a snapshot from being written; held polls leave a twentieth of the connections (at least 16) for
    /// other requests, `/healthz` among them, unless `--max-held-polls` was given, but at least one is held (none
    /// would refuse every poll `429`, "retry shortly", for good). Returns the fitted
    /// configuration and a line for the log when a limit was lowered.
    func fitted(toOpenFiles openFiles: Int, loops: Int) -> (config: Config, note: String?) {
        var fitted = self
        let available = max(loops, openFiles - Self.reservedDescriptors(threads: loops))
        fitted.maxConnections = min(maxConnections, available)
        let forOthers = maxHeldPollsIsExplicit ? 0 : max(16, fitted.maxConnections / 20)
        fitted.maxHeldPolls = min(maxHeldPolls, max(1, fitted.maxConnections - forOthers))
        guard fitted.maxConnections != maxConnections || fitted.maxHeldPolls != maxHeldPolls else {
            return (fitted, nil)
        }
        return (
            fitted,
            "the open-files limit is \(openFiles): at most \(fitted.maxConnections) connections "
                + "and \(fitted.maxHeldPolls) held polls (--max-connections \(maxConnections), "
                + "--max-held-polls \(maxHeldPolls))"
        )
    }

    /// The memory budgets' defaults fitted to a memory limit (a container's, `MemoryLimit`): bodies at most a
    /// sixteenth of it (but at least `--max-body-bytes`), large answers at most an eighth. A body costs several times
    /// its size while it is parsed and applied, next to the content and the history it replaces: 16 replacements
    /// of 8.7 MB at once peaked at 627 MB, the machine-sized 256 MiB of bodies got a container of 400 MiB killed by
    /// one client, and an eighth of it (50 MiB) still did, with clients that retried their `503`s; 18 MB held.
    /// Budgets given are kept. Returns the fitted configuration and a line for the log when a budget was lowered.
    func fitted(toMemory limit: Int?) -> (config: Config, note: String?) {
        guard let limit else { return (self, nil) }
        var fitted = self
        if !maxBodyMemoryIsExplicit { fitted.maxBodyMemory = max(maxBodyBytes, min(maxBodyMemory, limit / 16)) }
        if !maxResponseMemoryIsExplicit { fitted.maxResponseMemory = max(1, min(maxResponseMemory, limit / 8)) }
        var lowered: [String] = []
        if fitted.maxBodyMemory != maxBodyMemory { lowered.append("--max-body-memory \(fitted.maxBodyMemory)") }
        if fitted.maxResponseMemory != maxResponseMemory {
            lowered.append("--max-response-memory \(fitted.maxResponseMemory)")
        }
        guard !lowered.isEmpty else { return (fitted, nil) }
        return (
            fitted,
            "the memory limit is \(limit) bytes (cgroup): \(lowered.joined(separator: " and ")) by default (a "
                + "sixteenth and an eighth of it; give them to choose)"
        )
    }
}
