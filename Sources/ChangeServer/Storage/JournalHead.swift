import Glibc

/// The newest journal segment's number, in `journal-head`, written once the segment is made (at a start, and when
/// the journal moves on): the mark that closes a segment when the journal moves on reads like the one a clean stop
/// writes, so without it a start that does not find the newest segment (lost, or removed with everything written
/// since) served the older ones as if nothing had come after them.
enum JournalHead {
    static func path(_ directory: DataDirectory) -> String { directory.path + "/journal-head" }

    /// Notes `number` as the newest segment; a failure (a full disk) is logged: the check then holds for the segment
    /// noted before.
    static func record(_ number: UInt64, in directory: DataDirectory, logger: Logger) {
        // 20 digits and a line break: one length, rewritten in place (no new block, so a full disk takes it).
        if let failure = directory.writeLine(String(number), length: 21, to: path(directory)) {
            logger.warning(
                "cannot write \(path(directory)): \(failure); a start that does not find journal segment \(number) "
                    + "will not notice")
        }
    }

    /// The newest segment noted, nil when there is none (a directory of a build before, or a fresh one).
    static func read(_ directory: DataDirectory) -> UInt64? {
        guard let bytes = readWholeFile(path(directory)) else { return nil }
        return UInt64(String(decoding: bytes, as: UTF8.self).filter { $0 != "\n" && $0 != " " })
    }

    /// Refuses a start whose newest segment (`newest`, before empty ones are dropped; nil when there is none) is
    /// older than the one noted.
    static func check(_ directory: DataDirectory, newest: UInt64?) throws(StartupError) {
        guard let head = read(directory), newest.map({ $0 < head }) ?? true else { return }
        throw StartupError(
            "journal segment \(head) is missing: the journal had moved on to it (\(path(directory)) names it), so "
                + "whatever was written to it is lost; refusing to start on wrong data. Restore the data directory "
                + "from a backup (if the segment was removed on purpose, write the number of the newest one left "
                + "into \(path(directory)), and give the collections new epochs with scripts/new-epochs.py before "
                + "clients reach the server)")
    }
}
