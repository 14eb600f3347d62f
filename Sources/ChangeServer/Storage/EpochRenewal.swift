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
/// The decision is a file in the data directory, `epochs-renewal`, written and synced before anything is cut. The
/// start then writes a snapshot that holds the new epochs before it takes any write (`Snapshots.writeAtStart`), and
/// removes the file: replay must meet the new epochs before the writes made under them, whose conditions
/// (`If-Match`) name them. A start that stops before that renews again at the next.
enum EpochRenewal {
    /// Notes that this start renews every epoch, and why, synced before it returns, so that what is cut after it
    /// cannot be forgotten; returns `reason`. On a full disk an empty note (which needs no block) says it without
    /// the reason; a start that cannot write even that stops before cutting anything.
    static func mark(_ directory: DataDirectory, reason: String, logger: Logger) throws(StartupError) -> String {
        let path = markerPath(directory)
        guard let failure = directory.writeDurably(Array((reason + "\n").utf8), to: path) else { return reason }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0, close(descriptor) == 0, directory.syncDirectory() else {
            throw StartupError(
                "cannot write \(path) (\(failure)), which must note that the collections need new epochs before the "
                    + "start goes on: \(reason); free some space and start again")
        }
        logger.warning("cannot write the reason into \(path) (\(failure)): it is noted empty")
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
    /// reads whole: by its `RunRecord`, it used `--fsync interval` or `never`, did not close its journal, and the
    /// machine has restarted since (another boot id, or one that cannot be read); or its record is there and cannot
    /// be read. Nil when not (also without a record: a fresh directory, or one of a build before); otherwise the
    /// reason, for `mark`.
    static func lossSinceLastRun(_ directory: DataDirectory) -> String? {
        var info = stat()
        guard lstat(RunRecord.path(directory), &info) == 0 else { return nil }
        guard let last = RunRecord.read(directory) else {
            return "\(RunRecord.path(directory)) cannot be read (a rewrite torn by a crash?), so whether the last run "
                + "lost acknowledged writes is unknown"
        }
        guard !last.closed, last.policy != .always, last.boot != bootID() else { return nil }
        return "the last run, with --fsync \(last.policy.rawValue), stopped without closing its journal and the "
            + "machine has restarted since: what it wrote after its last sync may be lost"
    }

    /// The machine's boot (Linux's `/proc/sys/kernel/random/boot_id`; a container sees its host's), nil when it
    /// cannot be read: then every boot counts as another.
    static func bootID() -> String? {
        guard let text = readProcFile("/proc/sys/kernel/random/boot_id", limit: 64) else { return nil }
        let id = text.trimmingTrailingNewlines
        return id.isEmpty || id.contains(" ") ? nil : id
    }

    static func markerPath(_ directory: DataDirectory) -> String { directory.path + "/epochs-renewal" }
}

extension String {
    fileprivate var trimmingTrailingNewlines: String {
        var text = self
        while text.last == "\n" { text.removeLast() }
        return text
    }
}
