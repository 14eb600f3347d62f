/// Where a feed stands, for an app to show (a "reconnecting" banner, a spinner), as the web client's `onStatus`
/// reports it; `FeedEvent` carries the rest (`.reset`, `.missing`, and the sequence's end). Reported when it
/// changes; each failure is a change, with its own attempt and delay.
public enum FeedStatus: Hashable, Sendable {
    /// The first request is on its way.
    case connecting
    /// The server answers: changes come as they are made (and `.missing` says when there is nothing to show).
    case live
    /// A request failed (no network, the server down or restarting, `5xx`, `408`, `429`, a front's own page, a
    /// `404` to a poll from a saved version): the feed waits `delay`, then asks again. `attempt` counts the
    /// failures since a held poll was last answered (the short polls between them do not end the count).
    case retrying(attempt: Int, delay: Duration)
}
