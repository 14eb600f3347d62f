import Foundation

/// Checks `condition` every 10 ms until it holds or `timeout` seconds have passed; whether it held. For states a
/// test can observe but is not told about (a metric, a log line, open descriptors), in place of a fixed sleep.
func waitUntil(timeout: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + .seconds(timeout)
    while true {
        if try condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        Thread.sleep(forTimeInterval: 0.01)
    }
}
