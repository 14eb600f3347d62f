import Glibc

/// The snapshot read of an unchanged collection or view, answered from the request line and a header or two, before
/// a `Request` is built: the server's most frequent request then costs about what serving a static body costs
/// (`docs/benchmarks.md`, "Quick snapshot reads, measured": 9,100 instructions a read with the request log where
/// the usual way took 16,800).
///
/// It gives the same answer `handle` gives, byte for byte (the shared `200` or `304` of `EncodedSnapshot`), and only
/// where nothing else could change that answer; every other request, and every case it is unsure of, returns nil and
/// takes the usual way: a token or CORS origins named one by one (every answer then carries CORS headers of its
/// request's own; with `*` they are the same for all and shared too), a server that is not serving, a path that is
/// not exactly `/v1/collections/{name}` or `/v1/views/{name}` with a plain valid name, a subject not there, or a
/// snapshot not encoded yet at its current version (the usual way encodes it, and the next read is quick).
extension App {
    /// The route template and the shared answer of a body-less `GET` or `HEAD` of `path` (raw, without its query);
    /// `header` looks up a request header by name (case-insensitive).
    func quickRead(path: UnsafeBufferPointer<UInt8>, header: (String) -> String?) -> (route: String, Response)? {
        // With origins named one by one, every answer adds CORS headers of its own request, so none is shared.
        guard config.readToken == nil, config.writeToken == nil, sameCORSHeadersForAll != nil, currentState == .serving,
            let (kind, name) = Route.snapshotSubject(path)
        else { return nil }
        let subject: (any FeedSubject)? =
            switch kind {
            case .collection: registry.entry(name)
            case .view: views.entry(name)
            }
        guard let subject, let cached = subject.cachedSnapshot(at: subject.version) else { return nil }
        let route = kind == .collection ? "/v1/collections/{name}" : "/v1/views/{name}"
        if let ifNoneMatch = header("If-None-Match"), EntityTags(ifNoneMatch).matches(cached.version, weakly: true) {
            return (route, cached.notModified)
        }
        return (route, cached.read)
    }
}

extension Route {
    /// The subject a path reads when it is exactly `/v1/collections/{name}` or `/v1/views/{name}` with a valid
    /// name and no escape (`match` would find `.collection` or `.view` for it); nil for any other path, which
    /// `match` decides.
    static func snapshotSubject(_ path: UnsafeBufferPointer<UInt8>) -> (FeedSubjectKind, String)? {
        func name(after prefix: StaticString) -> String? {
            let count = prefix.utf8CodeUnitCount
            guard let base = path.baseAddress, path.count > count, memcmp(base, prefix.utf8Start, count) == 0 else {
                return nil
            }
            let name = UnsafeBufferPointer(rebasing: path[(path.startIndex + count)...])
            guard isValidName(name) else { return nil }
            return String(decoding: name, as: UTF8.self)
        }
        if let collection = name(after: "/v1/collections/") { return (.collection, collection) }
        if let view = name(after: "/v1/views/") { return (.view, view) }
        return nil
    }
}
