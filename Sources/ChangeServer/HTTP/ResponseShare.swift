import Synchronization

/// Marks a response whose bytes are the same for every request it answers (a snapshot, or its `304`, at one
/// version): the server builds libmicrohttpd's response for the first of those requests and queues that same one
/// on every later connection, on any loop, as the feed shares a changeset's response among its polls. A read of
/// an unchanged collection then costs what serving a static body costs.
final class ResponseShare: Sendable {
    private let built = Mutex<SharedResponse?>(nil)
    /// The response with the first set of extra headers asked for, and those headers: with `--cors-origin '*'`
    /// every request carries the same ones, so that reads share one response there too. Other sets (an origin
    /// echoed among several named ones) are built for their request alone.
    private let builtWithExtra = Mutex<(headers: [(name: String, value: String)], response: SharedResponse)?>(nil)

    /// The libmicrohttpd response for `response`, built on first use. `response` must be the one this share marks.
    func shared(_ response: Response) -> SharedResponse {
        built.withLock { built in
            if let built { return built }
            let made = SharedResponse(response)
            built = made
            return made
        }
    }

    /// The libmicrohttpd response for `response` with `extra` headers added (`Response.addHeaders`).
    func shared(_ response: Response, adding extra: [(name: String, value: String)]) -> SharedResponse {
        guard !extra.isEmpty else { return shared(response) }
        func withExtra() -> SharedResponse {
            var response = response
            response.addHeaders(extra)
            return SharedResponse(response)
        }
        return builtWithExtra.withLock { built in
            if let built {
                return built.headers.elementsEqual(extra, by: { $0 == $1 }) ? built.response : withExtra()
            }
            let made = withExtra()
            built = (extra, made)
            return made
        }
    }
}
