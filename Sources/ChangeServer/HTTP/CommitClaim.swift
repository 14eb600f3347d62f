import Synchronization

/// Who decides a held mutation's answer when the server stops: the record goes to the journal (then it takes
/// effect, now or when the journal is replayed, and only its outcome may answer it), or a stopping server gives
/// up on the request first and answers `503` (then its record is never submitted). Whichever claims it first wins,
/// so that a `503` never comes with an applied mutation.
final class CommitClaim: Sendable {
    private static let open: UInt8 = 0
    private static let submitted: UInt8 = 1
    private static let abandoned: UInt8 = 2
    private let state = Atomic<UInt8>(CommitClaim.open)

    /// Claims the request for the journal; false when the server gave up on it.
    func submit() -> Bool {
        state.compareExchange(expected: Self.open, desired: Self.submitted, ordering: .acquiringAndReleasing).exchanged
    }

    /// Gives up on the request; false when its record was submitted already.
    func abandon() -> Bool {
        state.compareExchange(expected: Self.open, desired: Self.abandoned, ordering: .acquiringAndReleasing).exchanged
    }

    /// Whether the record was submitted: the request waits for its outcome.
    var isSubmitted: Bool { state.load(ordering: .acquiring) == Self.submitted }

    /// Whether the server gave up on the request.
    var isAbandoned: Bool { state.load(ordering: .acquiring) == Self.abandoned }
}
