import Glibc
import Model

/// New epochs for every collection and view when a start may have lost versions that clients saw: a journal's
/// tail cut for damage (a corrupt byte in what was synced and answered reads as a torn write), a journal started
/// anew from the snapshot alone, or, after a run with `--fsync interval` or `never` that stopped without closing its
/// journal, a machine that has restarted since (what was in the kernel's cache only is gone). New writes would
/// number those versions again, with other content, and a client holding one would take the new content for what
/// it saw and never hear of the difference; with a new epoch its next poll is `410` and it starts over from a
/// snapshot.
///
/// The decision is a file in the data directory, `epochs-renewal`, written and synced before anything is cut, and
/// removed once a snapshot holds the new epochs (`Snapshots`, which starts one at once): a start that stops before
/// then renews again, which is harmless, since epochs are random and never taken twice. `last-run` holds the
/// machine's boot id and the fsync policy of the last start.
enum EpochRenewal {
    /// Notes that this start renews every epoch, and why, synced before it returns, so that what is cut after it
    /// cannot be forgotten; returns `reason`. A note that cannot be written (a full disk) is logged, and the epochs
    /// are renewed all the same: only a crash before the next snapshot would then forget it.
    static func mark(_ directory: DataDirectory, reason: String, logger: Logger) -> String {
        if !directory.writeDurably(Array((reason + "\n").utf8), to: markerPath(directory)) {
            logger.error(
                "cannot write \(markerPath(directory)): \(String(cString: strerror(errno))); the collections get new "
                    + "epochs all the same, but a crash before the next snapshot would forget that they need them")
        }
        return reason
    }

    /// Why every epoch is renewed, when a start decided so and no snapshot holds the new epochs yet.
    static func pendingReason(_ directory: DataDirectory) -> String? {
        guard let bytes = readWholeFile(markerPath(directory)) else { return nil }
        let reason = String(decoding: bytes, as: UTF8.self).trimmingTrailingNewlines
        return reason.isEmpty ? "noted by an earlier start" : reason
    }

    /// Gives every collection and view of `executor` a new epoch, their content unchanged.
    static func renew(_ executor: Executor) {
        var generator = SystemRandomNumberGenerator()
        for entry in executor.registry.all() {
            let epoch = Version.randomEpoch(using: &generator)
            entry.content.withLock { $0 = $0.renewed(epoch: epoch) }
        }
        for view in executor.views.all() {
            let epoch = Version.randomEpoch(using: &generator)
            view.live.withLock { $0.renewEpoch(epoch) }
        }
    }

    /// A snapshot holds the new epochs: the next start need not renew them.
    static func clear(_ directory: DataDirectory) {
        if unlink(markerPath(directory)) == 0 { _ = directory.syncDirectory() }
    }

    /// Whether the run before this start may have lost acknowledged writes that clients saw, though its journal
    /// reads whole: it used `--fsync interval` or `never`, stopped without closing its journal (`closedCleanly`
    /// false), and the machine has restarted since (another boot id, or one that cannot be read). Nil when not;
    /// otherwise the reason, for `mark`.
    static func lossSinceLastRun(_ directory: DataDirectory, closedCleanly: Bool) -> String? {
        guard !closedCleanly, let bytes = readWholeFile(lastRunPath(directory)) else { return nil }
        let fields = String(decoding: bytes, as: UTF8.self).split(separator: " ").map(String.init)
        guard fields.count == 2, let policy = Config.FsyncPolicy(rawValue: fields[1].trimmingTrailingNewlines),
            policy != .always, fields[0] != bootID()
        else { return nil }
        return "the last run, with --fsync \(policy.rawValue), stopped without closing its journal and the machine "
            + "has restarted since: what it wrote after its last sync may be lost"
    }

    /// Notes this start's boot id and fsync policy in `last-run`, for the next start's `lossSinceLastRun`. A
    /// start on a full disk goes on without it (logged): the next start then reads the run before this one's.
    static func recordRun(_ directory: DataDirectory, policy: Config.FsyncPolicy, logger: Logger) {
        let line = "\(bootID() ?? "unknown") \(policy.rawValue)\n"
        guard directory.writeDurably(Array(line.utf8), to: lastRunPath(directory)) else {
            return logger.warning(
                "cannot write \(lastRunPath(directory)): \(String(cString: strerror(errno))); a crash of this run "
                    + "followed by a restart of the machine may go unnoticed at the next start")
        }
    }

    /// The machine's boot (Linux's `/proc/sys/kernel/random/boot_id`; a container sees its host's), nil when it
    /// cannot be read: then every boot counts as another.
    static func bootID() -> String? {
        // A file of /proc says its size is 0: read what comes.
        let descriptor = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 64)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        let id = String(decoding: bytes[..<count], as: UTF8.self).trimmingTrailingNewlines
        return id.isEmpty || id.contains(" ") ? nil : id
    }

    static func markerPath(_ directory: DataDirectory) -> String { directory.path + "/epochs-renewal" }
    static func lastRunPath(_ directory: DataDirectory) -> String { directory.path + "/last-run" }

}

extension String {
    fileprivate var trimmingTrailingNewlines: String {
        var text = self
        while text.last == "\n" { text.removeLast() }
        return text
    }
}
