import Foundation
import Model

/// The events of one feed, as `FeedClient.events()` describes. Each `next()` polls until it has an event, so an
/// event is fetched only when the consumer asks for it.
public struct FeedEvents: AsyncSequence, Sendable {
    public typealias Element = FeedEvent
    /// `for try await` over the feed throws `FeedError` alone.
    public typealias Failure = FeedError

    let client: FeedClient
    let cursor: Version?
    let onStatus: (@Sendable (FeedStatus) -> Void)?

    public func makeAsyncIterator() -> Iterator {
        Iterator(client: client, since: cursor, onStatus: onStatus)
    }

    /// Runs the client loop; one iterator follows the feed once.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        public typealias Failure = FeedError
        let client: FeedClient
        /// The version of the last event; nil until the first reset.
        var since: Version?
        /// The query the last answer said to poll with.
        var next: String?
        /// Failures in a row (network, `5xx`, `408`, `429`, `404` to a poll with `since`), for the backoff.
        var failures = 0
        /// Empty answers in a row held less than half the poll's timeout. The first is polled again at once, the
        /// others wait like failures, so that a misbehaving server or cache cannot make the loop spin
        /// (`FeedClient.quickEmptyAnswer` says why the first does not wait).
        var quickRepeats = 0
        /// `410`s, and resets answered to a poll with `since` (which only a cache that ignores the query string
        /// gives), with nothing but resets and quick empty answers between them: the first is followed at once, the
        /// others wait like failures, so that a server or cache that expires every version at once, or answers
        /// every poll with its reset, cannot make the loop spin either. Only an answer that brings changes, or one
        /// held its time, ends the run.
        var goneRepeats = 0
        /// Whether `.missing` was the last event: the `404`s that follow it are waited out without another one.
        var isMissing = false
        /// The epoch of the collection a `410 collection_deleted` said was deleted: a reset at that epoch comes from a
        /// server that has not applied the deletion yet (a collection made again has a new epoch), and is waited out.
        var deletedEpoch: String?
        /// When the `410` that set `deletedEpoch` came (`FeedClient.staleResetPatience`).
        var deletedAt = ContinuousClock.now
        /// Resets at `deletedEpoch` in a row, for their backoff.
        var staleResets = 0
        /// `404`s in a row to polls with `since`.
        var notFoundPolls = 0
        /// Whether the next poll with `since` is a short one (`timeout=0`): the first, resumed from a saved
        /// version, and the first after a failure. The server answers it at once, so the feed is `.live` as soon as
        /// the server answers rather than once a held poll ends, up to its whole timeout later. Only a held poll's
        /// answer ends the backoff: a server that refuses held polls (`429` at `--max-held-polls`) answers short
        /// ones.
        ///
        /// It also opens the connection the held polls after it use. On Linux, FoundationNetworking keeps the
        /// write-readiness source it makes while a connection is being opened, and a socket is always writable:
        /// until the first request on a new connection is answered, libdispatch wakes without end, a whole core for
        /// a held poll's time (after every restart of the server, every network change). A new connection comes at
        /// the start and after a failure (the server may have closed it, or gone), where the poll is short: it is
        /// answered at once, or given up after `FeedClient.shortPollTimeout`. Apple's URLSession does not spin.
        var recovering = true
        /// The last failure was a `429`: the server refuses held polls (`--max-held-polls`) while it answers short
        /// ones. It is busy, not back, so a short poll's answer keeps the status `.retrying` (it would otherwise
        /// flip to `.live` and back at every pair of polls); a held poll's answer reports `.live`, and the held
        /// poll after the short one is held `FeedClient.probeSeconds` at most, so that it comes soon.
        var heldPollsRefused = false
        let onStatus: (@Sendable (FeedStatus) -> Void)?
        /// The status last reported; nil before the first request.
        var status: FeedStatus?

        init(client: FeedClient, since: Version?, onStatus: (@Sendable (FeedStatus) -> Void)?) {
            self.client = client
            self.since = since
            self.onStatus = onStatus
        }

        private mutating func report(_ status: FeedStatus) {
            guard status != self.status else { return }
            self.status = status
            onStatus?(status)
        }

        /// The next event; nil once the task is cancelled.
        /// - Throws: `FeedError` for an answer or changeset that breaks the contract, or a refusal that retrying
        ///   cannot fix.
        public mutating func next() async throws(FeedError) -> FeedEvent? {
            do {
                while true {
                    if let event = try await step() { return event }
                }
            } catch let error as FeedError {
                throw error
            } catch {
                // The loop throws nothing else but the cancellation of its waits (`CancellationError`).
                return nil
            }
        }

        /// One request; an event, or nil after a wait (empty poll, retry, reset to come).
        private mutating func step() async throws -> FeedEvent? {
            try Task.checkCancellation()
            if status == nil { report(.connecting) }
            let polledSince = since
            let isShort = recovering && since != nil
            // After a `429`, the held poll that follows the short one is held briefly: once the server takes held
            // polls again its answer comes within seconds, and with it `.live`, not a whole poll later.
            let isProbe = !isShort && heldPollsRefused && since != nil
            let seconds =
                isShort ? 0 : isProbe ? Swift.min(FeedClient.probeSeconds, client.pollSeconds) : client.pollSeconds
            let url = try client.feedURL(
                next: since == nil || isShort || isProbe ? nil : next, since: since,
                timeout: since == nil ? nil : seconds
            )
            if let token = client.token, let problem = Transport.problem(withToken: token) {
                throw FeedError.invalidRequest(problem)
            }
            let started = ContinuousClock.now
            let answer: HTTPAnswer
            do {
                answer = try await client.transport.get(
                    url, token: client.token,
                    timeout: isShort ? FeedClient.shortPollTimeout : .seconds(seconds + 15))
            } catch is CancellationError {
                throw CancellationError()
            } catch let error as NotSent where error.cancelled {
                throw CancellationError()
            } catch {
                try await wait(after: .failure, retryAfter: nil)
                return nil
            }
            switch answer.status {
            case 200:
                if !isShort || !heldPollsRefused { report(.live) }
                recovering = false
                if !isShort {
                    failures = 0
                    heldPollsRefused = false
                }
                notFoundPolls = 0
                let event = try await accept(
                    answer.body, polledSince: polledSince, heldFor: ContinuousClock.now - started,
                    isShort: isShort || isProbe)
                if case .reset = event {
                    isMissing = false
                    deletedEpoch = nil
                    staleResets = 0
                }
                return event
            case 410:
                report(.live)
                recovering = false
                failures = 0
                since = nil
                next = nil
                if goneRepeats > 0 { try await wait(after: .goneRepeat, retryAfter: answer.retryAfter) }
                goneRepeats += 1
                guard WireDecoding.serverError(answer).code == .collectionDeleted, !isMissing else { return nil }
                isMissing = true
                deletedEpoch = polledSince?.epoch
                deletedAt = .now
                return .missing
            case 404:
                return try await notFound(answer, polledSince: polledSince)
            case 408, 429, 500...599:
                // A stopping server closes the connection, and a front may have lost its own: the poll after the
                // wait is short (`recovering`).
                // The server's own `429` for held polls is busy, not failing; a front's rate limit backs off fully.
                let busy = answer.status == 429 && WireDecoding.serverError(answer).code == .tooManyPolls
                try await wait(after: .failure, retryAfter: answer.retryAfter, busy: busy)
                heldPollsRefused = answer.status == 429
                return nil
            default:
                throw FeedError(refusal: WireDecoding.serverError(answer))
            }
        }

        /// A `404`: the collection or view missing, no such route, or a front's own page.
        private mutating func notFound(_ answer: HTTPAnswer, polledSince: Version?) async throws -> FeedEvent? {
            let error = WireDecoding.serverError(answer)
            switch error.code {
            case .routeNotFound:
                // The server has no such route: a base URL with a wrong path. Waiting would not make it exist.
                throw FeedError(refusal: error)
            case client.kind.notFoundCode:
                break
            default:
                // Not the server's word that the collection or view is missing: a front's own page (a proxy being
                // deployed, say). Retried as a failure.
                try await wait(after: .failure, retryAfter: answer.retryAfter)
                return nil
            }
            switch polledSince {
            case nil where !isMissing:
                // A reset found nothing: the server answers, so the failures before (a server still starting) end.
                report(.live)
                recovering = false
                failures = 0
                isMissing = true
                return .missing
            case nil:
                // Still missing: asked again at a steady pace, so that it is seen soon after it is made.
                report(.live)
                recovering = false
                try await Task.sleep(for: client.missingRetryDelay(atLeast: answer.retryAfter))
                return nil
            case .some:
                // With several servers, one may not have applied a creation the others did yet (milliseconds): a
                // poll with `since` that meets a `404` waits and asks again. After three in a row the collection is
                // gone (deleted while the app was away, say): a reset asks whether it exists.
                notFoundPolls += 1
                if notFoundPolls >= 3 {
                    notFoundPolls = 0
                    since = nil
                    next = nil
                }
                try await wait(after: .failure, retryAfter: answer.retryAfter)
                return nil
            }
        }

        /// A `200`'s body; `isShort`: the answer to a short poll, which came at once by asking, or to a poll held
        /// briefly after a `429` (`FeedClient.probeSeconds`): its `next` is not followed, and an empty one is not a
        /// quick answer.
        private mutating func accept(_ body: Data, polledSince: Version?, heldFor held: Duration, isShort: Bool)
            async throws -> FeedEvent?
        {
            switch try WireDecoding.feedAnswer(Array(body), kind: client.kind) {
            case .reset(let snapshot, let next):
                if polledSince == nil, let deletedEpoch, snapshot.version.epoch == deletedEpoch,
                    ContinuousClock.now - deletedAt < client.staleResetPatience
                {
                    staleResets += 1
                    try await wait(after: .staleReset, retryAfter: nil)
                    return nil
                }
                since = snapshot.version
                self.next = FeedClient.heldQuery(next)
                guard let polledSince else {
                    quickRepeats = 0
                    return .reset(snapshot)
                }
                // The server answers a poll with `since` with changes or a `410`, never a reset: this one came from
                // a cache that ignores the query string, and may come again at once. Waited out as `410`s are.
                if goneRepeats > 0 { try await wait(after: .goneRepeat, retryAfter: nil) }
                goneRepeats += 1
                return snapshot.version == polledSince ? nil : .reset(snapshot)
            case .changes(let changeset, let next):
                guard changeset.from == since else {
                    throw FeedError.invalidAnswer(
                        "a changeset from \(changeset.from), polled since \(since.map { "\($0)" } ?? "-")")
                }
                since = changeset.to
                self.next = isShort ? nil : FeedClient.heldQuery(next)
                if changeset.isEmpty && changeset.from == changeset.to {
                    if isShort { return nil }
                    guard held < client.quickEmptyAnswer else {
                        quickRepeats = 0
                        goneRepeats = 0
                        return nil
                    }
                    if quickRepeats > 0 { try await wait(after: .quickRepeat, retryAfter: nil) }
                    quickRepeats += 1
                    return nil
                }
                quickRepeats = 0
                goneRepeats = 0
                return .changes(changeset)
            }
        }

        private enum Cause { case failure, quickRepeat, goneRepeat, staleReset }

        /// `busy`: the failure is the server's own `429 too_many_polls`, whose wait is capped
        /// (`FeedClient.retryDelay`).
        private mutating func wait(after cause: Cause, retryAfter: Duration?, busy: Bool = false) async throws {
            let attempt: Int
            switch cause {
            case .failure:
                heldPollsRefused = false
                failures += 1
                attempt = failures
                recovering = true
            case .quickRepeat:
                attempt = quickRepeats
            case .goneRepeat:
                attempt = goneRepeats
            case .staleReset:
                attempt = staleResets
            }
            let delay = client.retryDelay(attempt: attempt, retryAfter: retryAfter, busy: busy)
            if cause == .failure { report(.retrying(attempt: attempt, delay: delay)) }
            try await Task.sleep(for: delay)
        }
    }
}
