import Model

extension App {
    /// Recovers the collections from `--data-dir` and assembles the application around them: the journal, the
    /// lanes, snapshots, the commit path and the feeds' fan-out. The event loops are added by the caller; routes
    /// work without them (answers go through each request's `Connection`), which is how tests run them in-process.
    /// `recordLimit` lowers the journal's largest record, for tests of the `413` it gives.
    static func open(config: Config, logger: Logger, recordLimit: Int = JournalFormat.maximumPayload)
        throws(StartupError) -> App
    {
        if let url = config.postgres { return try openOnPostgres(url: url, config: config, logger: logger) }
        let metrics = Metrics()
        let registry = Registry()
        let views = ViewRegistry()
        let directory = try DataDirectory.open(config.dataDirectory)
        if directory.wasCreated { logger.log(.notice, "created --data-dir \(directory.path): it did not exist") }
        let executor = Executor(registry: registry, views: views, limits: config.historyLimits)
        let position = try Recovery.run(directory, executor: executor, logger: logger)
        let journal = try FileJournal(
            directory: directory, segment: position.segment, size: position.size,
            bytesSinceSnapshot: position.bytesSinceSnapshot, policy: config.fsync, recordLimit: recordLimit,
            metrics: metrics, logger: logger)
        let lanes = Lanes()
        let snapshots = Snapshots(
            directory: directory, journal: journal, registry: registry, views: views, lanes: lanes,
            threshold: config.snapshotBytes,
            logger: logger)
        if position.renewedEpochs {
            try snapshots.writeAtStart()
        } else {
            snapshots.compactAfterStart(definitionItems: position.definitionItems)
        }
        let feeds = FeedFanOut()
        let committer = Committer(
            executor: executor, journal: journal, lanes: lanes, snapshots: snapshots, metrics: metrics,
            publish: feeds.publish)
        let app = App(config: config, logger: logger, metrics: metrics, registry: registry, committer: committer)
        feeds.connect(app)
        return app
    }
}
