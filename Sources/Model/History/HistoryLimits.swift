/// How much history a collection keeps for its change feed.
public struct HistoryLimits: Hashable, Sendable {
    /// At most this many past mutations are kept: `changes(since:)` answers for the current version and the
    /// `versions` versions before it.
    public var versions: Int
    /// An approximate budget, in bytes, for what the kept mutations record; the oldest are dropped beyond it.
    public var bytes: Int

    /// Limits of `versions` past mutations within about `bytes` bytes.
    public init(versions: Int = 1000, bytes: Int = 64 << 20) {
        self.versions = versions
        self.bytes = bytes
    }
}
