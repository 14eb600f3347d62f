import Model

/// A request on one of the server's connections: answers go back to the worker's loop, where the exchange lives,
/// and held polls go to that loop's feed.
final class ExchangeConnection: Connection, @unchecked Sendable {
    // @unchecked: the exchange is touched only on its worker's loop thread (`hold` is called there; `answer`
    // posts there), but for its `commit`, which is made to be shared.
    private let exchange: Exchange
    private unowned let worker: Worker

    init(_ exchange: Exchange, on worker: Worker) {
        self.exchange = exchange
        self.worker = worker
    }

    func answer(_ response: Response) {
        let held = LoopBound(exchange)
        worker.post { [worker] in worker.server.answer(held.value, with: response) }
    }

    func startStream(_ start: StreamStart) {
        let held = LoopBound(exchange)
        worker.post { [worker] in worker.startStream(start, on: held.value) }
    }

    func claimCommit() -> Bool { exchange.commit.submit() }

    var isAbandoned: Bool { exchange.commit.isAbandoned }

    func hold(on subject: FeedSubject, since: Version, timeout: Int, cursor: Int64?) {
        exchange.watchesHangUp = true
        worker.feed.hold(exchange, on: subject, since: since, timeout: timeout, cursor: cursor)
    }
}
