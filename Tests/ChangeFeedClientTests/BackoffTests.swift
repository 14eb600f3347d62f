import Foundation
import Testing

@testable import ChangeFeedClient

/// The waits between a feed's retries: the backoff's doubling, at least `Retry-After`, and at most a few seconds
/// after a `429` unless `Retry-After` asks more.
@Suite struct BackoffTests {
    let client = FeedClient(baseURL: URL(string: "http://127.0.0.1:9")!, name: "c")

    @Test func failuresDoubleUpToTheCap() {
        for _ in 0..<50 {
            let first = client.retryDelay(attempt: 1, retryAfter: nil, busy: false)
            #expect(first >= .milliseconds(125) && first <= .milliseconds(250), "\(first)")
            let late = client.retryDelay(attempt: 20, retryAfter: nil, busy: false)
            #expect(late >= .seconds(15) && late <= .seconds(30), "\(late)")
            #expect(client.retryDelay(attempt: 1, retryAfter: .seconds(7), busy: false) == .seconds(7))
        }
    }

    /// Zero (or less) for a step or for `missingRetry` would make a feed's retries spin: 10 ms is the least.
    @Test func noWaitIsZero() {
        let zero = Backoff(initial: .zero, maximum: .zero)
        var client = client
        client.missingRetry = .zero
        for attempt in 1...5 {
            #expect(zero.delay(attempt: attempt) >= .milliseconds(5), "attempt \(attempt)")
            #expect(client.missingRetryDelay(atLeast: nil) >= .milliseconds(5))
        }
        #expect(Backoff(initial: .seconds(-1)).delay(attempt: 1) >= .milliseconds(5))
    }

    /// A refused held poll (`429` at `--max-held-polls`) is retried within a few seconds however many came
    /// before: its changes come by the short polls between, and the doubling took them up to 30 s late.
    @Test func aBusyServerIsAskedAgainWithinSeconds() {
        var waits: [Duration] = []
        for attempt in 1...40 {
            let wait = client.retryDelay(attempt: attempt, retryAfter: .seconds(1), busy: true)
            #expect(wait >= .seconds(1) && wait <= FeedClient.busyRetryCap, "attempt \(attempt): \(wait)")
            waits.append(wait)
        }
        #expect(waits[30...].contains { $0 > .seconds(2) }, "still jittered: \(waits)")
        // A server that asks for more is waited for.
        #expect(client.retryDelay(attempt: 40, retryAfter: .seconds(20), busy: true) == .seconds(20))
        // The first waits stay the backoff's: shorter than the cap.
        #expect(client.retryDelay(attempt: 1, retryAfter: nil, busy: true) <= .milliseconds(250))
    }
}
