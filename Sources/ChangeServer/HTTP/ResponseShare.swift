import Synchronization

/// Marks a response whose bytes are the same for every request it answers (a snapshot, or its `304`, at one
/// version): the server builds libmicrohttpd's response for the first of those requests and queues that same one
/// on every later connection, on any loop, as the feed shares a changeset's response among its polls. A read of
/// an unchanged collection then costs what serving a static body costs.
final class ResponseShare: Sendable {
    private let built = Mutex<SharedResponse?>(nil)
    /// The response with the extra headers every request of the server carries (`--cors-origin '*'`'s), and those
    /// headers: kept, as `built` is, for the reads of this version.
    private let builtWithExtra = Mutex<(headers: [(name: String, value: String)], response: SharedResponse)?>(nil)

    /// The libmicrohttpd response for `response`, built on first use. `response` must be the one this share marks.
    /// `budget`: as `SharedResponse.init`'s; a response that lacked memory is not kept.
    func shared(_ response: Response, budget: MemoryBudget? = nil) -> SharedResponse {
        built.withLock { built in
            if let built { return built }
            let made = SharedResponse(response, budget: budget)
            if !made.lackedMemory { built = made }
            return made
        }
    }

    /// The libmicrohttpd response for `response` with `extra` headers added (`Response.addHeaders`), built on first
    /// use. `extra` must be the same for every request (`Exchange.extraHeadersAreTheSameForAll`); other headers get
    /// a response of their own, never kept. The response is built outside the lock: it copies the body.
    func shared(_ response: Response, adding extra: [(name: String, value: String)], budget: MemoryBudget? = nil)
        -> SharedResponse
    {
        guard !extra.isEmpty else { return shared(response, budget: budget) }
        func kept(_ built: (headers: [(name: String, value: String)], response: SharedResponse)?) -> SharedResponse? {
            guard let built, built.headers.elementsEqual(extra, by: { $0 == $1 }) else { return nil }
            return built.response
        }
        if let found = builtWithExtra.withLock({ kept($0) }) { return found }
        var withExtra = response
        withExtra.addHeaders(extra)
        let made = SharedResponse(withExtra, budget: budget)
        return builtWithExtra.withLock { built in
            if let found = kept(built) { return found }
            if built == nil, !made.lackedMemory { built = (extra, made) }
            return made
        }
    }
}
