import Glibc
import Model

/// How feed answers are marked for HTTP caches, and the `next` query string every `200` feed answer carries
/// (API.md, "The feed through HTTP caches").
///
/// Without `--read-token` every client at version `since` asks the same URL, and any changeset from `since` to a
/// later version is a valid answer for all of them: a shared cache may store answers and collapse identical
/// concurrent polls into one request to the server. The invariant that makes this safe is that **no client asks
/// the same URL twice in a row after an empty answer**: an empty answer's `next` holds a `cursor` greater than
/// the request's, so a client never gets the cached empty answer it just had, and never re-polls at once.
///
/// - Answers with changes: `public, max-age=60`: long enough to collapse a burst of clients arriving at a
///   version; any later client at `since` may be served them too, and then polls from their `to`.
/// - Empty answers (the poll's timeout), resets, `410`s and `404`s (no such collection or view): `public,
///   max-age=2` (resets add `stale-while-revalidate=2`: served expired while a cache refreshed one, an idle URL's
///   reset was minutes old, behind the kept versions or of a deleted collection): long enough for a cache's
///   waiting requests to be served the answer that just landed (nginx re-checks every 500 ms), short enough that
///   a late client is not kept on an old version. A `404` is stored so that it replaces what the cache held for
///   the URL: nginx keeps an entry that a `no-store` answer would have replaced, and (with
///   `proxy_cache_use_stale updating`) went on serving a deleted collection's last reset to the requests that came
///   while another refreshed it, for as long as requests came.
/// - Other errors (`400`, `429`, `503`), a `410` for a cursor ahead of the current version, and preflights:
///   `no-store`.
/// - With `--read-token`: `private, no-store` for every one of them, and nothing else changes.
struct FeedCaching: Sendable {
    /// What a feed answer is, as far as caches are concerned.
    enum Kind {
        case changes
        case empty
        case reset
        /// `410`, or `404`: the collection or view (or the cursor's epoch of it) is not there.
        case gone
        /// Any other error, or a preflight: never stored.
        case notStored

        /// The kind of an error answer.
        init(error: HTTPError) {
            self = error.mayBeStored && (error.status == .gone || error.status == .notFound) ? .gone : .notStored
        }
    }

    static let changesMaxAge = 60
    /// The largest cursor a request may carry (2^53, exact in every JSON number), so that its successor fits.
    static let maximumCursor: Int64 = 1 << 53
    static let briefMaxAge = 2

    /// Whether answers may be stored by shared caches: only when reads need no token.
    let isShared: Bool

    /// The caching headers of a feed answer of that kind: its `Cache-Control`, and `Vary: Accept`, since the same
    /// URL answers `Accept: text/event-stream` with a stream: a cache must not hand a stored JSON answer to an
    /// `EventSource`, which fails for good on the wrong media type.
    func headers(_ kind: Kind) -> [(name: String, value: String)] {
        [("Cache-Control", cacheControl(kind)), ("Vary", "Accept")]
    }

    /// The `Cache-Control` value of a feed answer of that kind.
    func cacheControl(_ kind: Kind) -> String {
        guard isShared else { return "private, no-store" }
        switch kind {
        case .changes: return "public, max-age=\(Self.changesMaxAge)"
        case .empty, .gone: return "public, max-age=\(Self.briefMaxAge)"
        case .reset: return "public, max-age=\(Self.briefMaxAge), stale-while-revalidate=\(Self.briefMaxAge)"
        case .notStored: return "no-store"
        }
    }

    /// `since=<to>&timeout=<timeout>`: where a client goes after an answer that reached `to` (changes or a reset).
    /// Every client that reaches `to` is sent to the same URL, so that a cache collapses their polls.
    static func next(to: Version, timeout: Int) -> String {
        "since=\(to)&timeout=\(timeout)"
    }

    /// `since=<version>&timeout=<timeout>&cursor=<n>`: where a client goes after an empty answer.
    static func next(at version: Version, timeout: Int, cursor: Int64) -> String {
        "since=\(version)&timeout=\(timeout)&cursor=\(cursor)"
    }

    /// The cursor of an empty answer's `next`: the number of the `timeout`-long interval of wall-clock time the
    /// answer is made in, and always greater than the request's own cursor.
    ///
    /// Counting intervals of the poll's own length makes clients at the same version that were answered within
    /// one interval ask the same next URL, so their groups merge in the cache instead of multiplying; and since
    /// such a URL is first asked in its interval and held for a whole timeout, it is still held (not yet cached
    /// empty) whenever a client asks it within that interval. Being greater than the request's cursor keeps a
    /// client from ever asking the same URL twice in a row, whatever the clock does; after the largest cursor the
    /// server takes (`maximumCursor`, far beyond any interval's number) it goes back to the interval's number.
    static func nextCursor(after requestCursor: Int64?, timeout: Int, now: Int64 = wallClockSeconds()) -> Int64 {
        let interval = now / Int64(max(timeout, 1))
        guard let requestCursor, requestCursor < maximumCursor else { return interval }
        return max(requestCursor + 1, interval)
    }

    /// Seconds since the Unix epoch.
    static func wallClockSeconds() -> Int64 {
        Int64(time(nil))
    }

    /// The entity tag of a feed answer: its versions (and cursor), which decide its body for a given URL.
    static func entityTag(from: Version, to: Version, cursor: Int64? = nil) -> String {
        cursor.map { "\"\(from)-\(to)-\($0)\"" } ?? "\"\(from)-\(to)\""
    }

    /// The entity tag of a reset answer.
    static func resetEntityTag(_ version: Version) -> String {
        "\"reset-\(version)\""
    }
}
