import Foundation

/// Checks `condition` every 10 ms until it holds or `timeout` seconds have passed; whether it held. For states a
/// test can observe but is not told about (a metric, a log line, open descriptors), in place of a fixed sleep.
public func waitUntil(timeout: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + .seconds(timeout)
    while true {
        if try condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        Thread.sleep(forTimeInterval: 0.01)
    }
}

/// The same for async tests: it sleeps with `Task.sleep`, never blocking a thread of the cooperative pool (two
/// threads on a 2-core machine: a test blocking one while another suite blocks the other would stop every task,
/// the client's among them).
public func waitUntil(timeout: Double, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .seconds(timeout)
    while true {
        if try await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
}

/// Waits up to `timeout` seconds for `process` to exit by itself, and kills it (SIGKILL, by its PID as the ID of the
/// process group Foundation starts it in, so with anything it started) if it does not, so that a server which should
/// have refused to start cannot hold the test; whether it exited by itself.
public func waitForExit(of process: Process, timeout: Double) -> Bool {
    let exited = waitUntil(timeout: timeout) { !process.isRunning }
    if !exited { kill(-process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
    return exited
}

/// Runs `work` on a thread of its own and awaits its result. A test that waits seconds or minutes for a program
/// (node, Chromium, schemathesis) must not block a thread of the cooperative pool meanwhile: the pool has as many
/// threads as the machine has cores (two here), and every async test of the run, with the tasks of the clients it
/// drives, stops while they are all blocked.
public func onOwnThread<Result: Sendable>(_ work: @escaping @Sendable () throws -> Result) async throws -> Result {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Swift.Result { try work() }) }
    }
}
