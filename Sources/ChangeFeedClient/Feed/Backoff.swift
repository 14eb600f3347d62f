/// How long to wait before trying again after a failure: exponential, capped, with "equal jitter" (a uniformly
/// random wait between half the step and the step), so clients that failed together do not return together, and
/// none comes back at once.
public struct Backoff: Hashable, Sendable {
    /// The step of the first retry.
    public var initial: Duration
    /// The largest step.
    public var maximum: Duration

    /// A policy doubling from `initial` up to `maximum`.
    public init(initial: Duration = .milliseconds(250), maximum: Duration = .seconds(30)) {
        self.initial = initial
        self.maximum = maximum
    }

    /// The shortest step, whatever `initial` and `maximum` say: with zero a feed's retries would spin.
    public static let shortestStep = Duration.milliseconds(10)

    /// The wait before retry number `attempt` (1 for the first retry), never less than `atLeast` (a server's
    /// `Retry-After`).
    public func delay(attempt: Int, atLeast floor: Duration = .zero) -> Duration {
        let doublings = min(max(attempt - 1, 0), 30)
        let step = max(min(initial * (1 << doublings), maximum), Self.shortestStep)
        let fraction = Double.random(in: 0.5...1.0)
        return max(step * fraction, floor)
    }
}
