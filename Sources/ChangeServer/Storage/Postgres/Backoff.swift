/// Capped, jittered exponential backoff for reconnecting: 50 ms doubling up to 2 s, each wait drawn at random
/// between half and all of it, so that servers that lost the database together do not reconnect in step.
struct Backoff {
    static let first = 50
    static let cap = 2000
    private var current = Backoff.first

    /// The next wait in milliseconds.
    mutating func next() -> Int {
        let wait = Int.random(in: (current / 2)...current)
        current = min(current * 2, Self.cap)
        return wait
    }

    mutating func reset() { current = Self.first }
}
