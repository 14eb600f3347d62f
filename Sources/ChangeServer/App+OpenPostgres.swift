import Model

extension App {
    /// Assembles the application on PostgreSQL (`--postgres`): recovery from the database, then the shared
    /// journal, whose follower hands the records of other servers to the commit path in order with this server's.
    static func openOnPostgres(url: String, config: Config, logger: Logger) throws(StartupError) -> App {
        let metrics = Metrics()
        let (executor, recovered) = try PostgresRecovery.recover(url: url, logger: logger) {
            Executor(registry: Registry(), views: ViewRegistry(), limits: config.historyLimits)
        }
        let registry = executor.registry
        let views = executor.views
        let journal = try PostgresJournal(
            url: url, applied: recovered.applied, snapshotBytes: config.snapshotBytes,
            purgeDelay: Int64(config.purgeDelaySeconds) * 1000, stallLimit: Int64(config.postgresTimeout) * 1000,
            viewSource: { name in views.source(of: name) }, logger: logger)
        let feeds = FeedFanOut()
        let committer = Committer(
            executor: executor, journal: journal, lanes: Lanes(), snapshots: nil, metrics: metrics,
            publish: feeds.publish)
        let app = App(config: config, logger: logger, metrics: metrics, registry: registry, committer: committer)
        feeds.connect(app)
        journal.start(
            applyingRemote: committer.applyRemote,
            copyOnLane: { name, take in
                committer.onLane(of: name) {
                    take(
                        (
                            registry.entry(name).map { entry in entry.content.withLock { $0 } },
                            views.saved(feedingFrom: name)
                        ))
                }
            },
            fellBehind: { [unowned app] name in
                app.logger.log(
                    .critical,
                    "stopping with exit status \(App.fallenBehindStatus) so that this server starts again from what the "
                        + "database holds of \(name) instead of serving what it no longer holds")
                app.stop(exitStatus: App.fallenBehindStatus)
            })
        journal.purgeLater(recovered.deleted)
        journal.snapshotAfterStart(definitionItems: recovered.definitionItems, movedTo: recovered.movedTo)
        return app
    }
}
