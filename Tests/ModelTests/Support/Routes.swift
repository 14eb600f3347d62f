import Synchronization

@testable import Model

/// Runs `body` and returns, with its result, how each changeset it had built was built (log or full diff), in
/// order: only this task's changesets, whatever other tests run meanwhile.
func routes<Result>(of body: () throws -> Result) rethrows -> (result: Result, routes: [Coalescing.Route]) {
    let seen = Mutex<[Coalescing.Route]>([])
    let observer: @Sendable (Coalescing.Route) -> Void = { route in seen.withLock { $0.append(route) } }
    let result = try Coalescing.$routeObserver.withValue(observer) { try body() }
    return (result, seen.withLock { $0 })
}
