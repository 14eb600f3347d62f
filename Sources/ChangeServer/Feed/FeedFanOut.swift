import Synchronization

/// Carries what the commit path publishes to the feed of every event loop. It is made before the app (the commit
/// path needs it) and connected to the app once the app exists, before any request is served.
final class FeedFanOut: Sendable {
    private let app = Mutex<App?>(nil)

    func connect(_ app: App) {
        self.app.withLock { $0 = app }
    }

    /// Posts the publication to every worker's loop, where its feed answers the polls and its stream hub feeds the
    /// streams it concerns. A commit nobody follows goes nowhere (`Followers`); a deletion always goes, so that a
    /// poll held on a collection being deleted gets its `410` at once.
    @Sendable func publish(_ publication: Committer.Publication) {
        guard let app = app.withLock({ $0 }) else { return }
        switch publication {
        case .committed(let subject, let changes):
            guard !subject.followers.isEmpty else { return }
            app.onEveryWorker { worker in
                worker.feed.committed(subject, changes)
                worker.streams.committed(subject, changes)
            }
        case .deleted(let subject):
            app.onEveryWorker { worker in
                worker.feed.deleted(subject)
                worker.streams.deleted(subject)
            }
        }
    }
}
