import Synchronization

/// Marks a response whose bytes are the same for every request it answers (a snapshot, or its `304`, at one
/// version): the server builds libmicrohttpd's response for the first of those requests and queues that same one
/// on every later connection, on any loop, as the feed shares a changeset's response among its polls. A read of
/// an unchanged collection then costs what serving a static body costs.
final class ResponseShare: Sendable {
    private let built = Mutex<SharedResponse?>(nil)

    /// The libmicrohttpd response for `response`, built on first use. `response` must be the one this share marks.
    func shared(_ response: Response) -> SharedResponse {
        built.withLock { built in
            if let built { return built }
            let made = SharedResponse(response)
            built = made
            return made
        }
    }
}
