import Glibc

/// The `--data-dir`: journal segments `journal-<number>.log`, one `snapshot.bin`, and a `LOCK` file held with
/// `flock` so that a second server on the same directory is refused. The lock is held while this object lives.
final class DataDirectory: Sendable {
    let path: String
    /// Whether it did not exist and was made (with any missing parents): worth a line of the log, since a typo in
    /// `--data-dir` starts an empty store.
    let wasCreated: Bool
    private let lockDescriptor: Int32

    /// Creates the directory if needed and takes its lock.
    static func open(_ path: String) throws(StartupError) -> DataDirectory {
        var info = stat()
        let existed = stat(path, &info) == 0
        try makeDirectories(path)
        let lockPath = path + "/LOCK"
        let descriptor = Glibc.open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            let code = errno
            let reason = String(cString: strerror(code))
            var info = stat()
            let owner =
                code == EACCES && stat(lockPath, &info) == 0
                ? " (it belongs to uid \(info.st_uid) and has mode \(String(info.st_mode & 0o777, radix: 8)); this "
                    + "server runs as uid \(getuid()): give the data directory and its files to that user)" : ""
            throw StartupError("cannot open \(lockPath) to write: \(reason)\(owner)")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            throw StartupError("another ChangeServer is using --data-dir \(path) (its LOCK file is held)")
        }
        let directory = DataDirectory(path: path, wasCreated: !existed, lockDescriptor: descriptor)
        try directory.checkFilesCanBeCreated()
        // A snapshot being written when the last process stopped: never renamed into place, so never read, and
        // its size (the data's) may be the room a full disk lacks.
        unlink(directory.temporarySnapshotPath)
        try directory.removeSegmentsBeingMade()
        return directory
    }

    /// Removes the segments a stop left being made (`FileJournal.openSegment`): never renamed into place, so
    /// never written, they hold a header at most. One that holds more was renamed, and written, but the rename was
    /// lost with the directory's sync (a crash right after it failed): its records may have been acknowledged, so
    /// the start is refused rather than remove it.
    private func removeSegmentsBeingMade() throws(StartupError) {
        let numbers: [UInt64]
        do throws(FileReadFailure) {
            numbers = try segments(suffix: ".log.tmp")
        } catch {
            throw StartupError("cannot list the data directory \(path): \(error)")
        }
        for number in numbers {
            let temporary = temporarySegmentPath(number)
            var info = stat()
            guard lstat(temporary, &info) == 0, info.st_size <= JournalFormat.headerSize else {
                throw StartupError(
                    "\(temporary) holds more than a segment's header: it may hold acknowledged records under the name "
                        + "a segment is made with; rename it to \(segmentPath(number)) if that is missing, or move it "
                        + "away")
            }
            unlink(temporary)
        }
    }

    /// The journal starts new segments and snapshots are written beside it: a directory whose files could be
    /// written but where none could be created (its mode, its owner) passed the start, took writes, and then failed
    /// every compaction, once a second, while the journal grew with no bound and `/healthz` said `ok`.
    private func checkFilesCanBeCreated() throws(StartupError) {
        let probe = path + "/.write-check"
        // A leftover of a stop between the two steps goes first; the probe never follows a link.
        unlink(probe)
        let descriptor = Glibc.open(probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw StartupError(
                "cannot create files in --data-dir \(path) (new journal segments and snapshots go there): "
                    + String(cString: strerror(errno)))
        }
        close(descriptor)
        guard unlink(probe) == 0 else {
            throw StartupError(
                "cannot remove files in --data-dir \(path) (compaction removes journal segments): "
                    + String(cString: strerror(errno)))
        }
    }

    private init(path: String, wasCreated: Bool, lockDescriptor: Int32) {
        self.path = path
        self.wasCreated = wasCreated
        self.lockDescriptor = lockDescriptor
    }

    deinit { close(lockDescriptor) }

    private static func makeDirectories(_ path: String) throws(StartupError) {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component + "/"
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                throw StartupError("cannot create --data-dir \(path): \(String(cString: strerror(errno)))")
            }
        }
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw StartupError("--data-dir \(path) is not a directory")
        }
    }

    var snapshotPath: String { path + "/snapshot.bin" }
    var temporarySnapshotPath: String { path + "/snapshot.bin.tmp" }

    func segmentPath(_ number: UInt64) -> String {
        let digits = String(number)
        return path + "/journal-" + String(repeating: "0", count: max(0, 20 - digits.count)) + digits + ".log"
    }

    /// Where segment `number` is made before it is renamed into place.
    func temporarySegmentPath(_ number: UInt64) -> String { segmentPath(number) + ".tmp" }

    /// The numbers of the journal segments present, in order (or of the files named as segments are but ending in
    /// `suffix`). A directory that cannot be listed must not pass for an empty one: recovery would start an empty
    /// journal over the segments it could not see.
    func segments(suffix: String = ".log") throws(FileReadFailure) -> [UInt64] {
        guard let directory = opendir(path) else { throw FileReadFailure(errno: errno) }
        defer { closedir(directory) }
        var numbers: [UInt64] = []
        while true {
            errno = 0
            guard let entry = readdir(directory) else {
                if errno != 0 { throw FileReadFailure(errno: errno) }
                break
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasPrefix("journal-"), name.hasSuffix(suffix),
                let number = UInt64(name.dropFirst(8).dropLast(suffix.utf8.count))
            else { continue }
            numbers.append(number)
        }
        return numbers.sorted()
    }

    /// Makes renames and new files in the directory durable; false (`errno` set) when it could not.
    /// Writes `bytes` to `path` (in this directory) under a temporary name (`path` and `.tmp`), syncs them,
    /// renames the file into place and syncs the directory, so that a crash leaves either the old file or the new
    /// one, whole. The reason, when it could not be written.
    func writeDurably(_ bytes: [UInt8], to path: String) -> String? {
        let temporary = path + ".tmp"
        let descriptor = Glibc.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { return String(cString: strerror(errno)) }
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                let reason = count == 0 ? String(cString: strerror(ENOSPC)) : String(cString: strerror(errno))
                close(descriptor)
                unlink(temporary)
                return reason
            }
            offset += count
        }
        let synced = fsync(descriptor) == 0
        let reason = String(cString: strerror(errno))
        close(descriptor)
        guard synced, rename(temporary, path) == 0 else {
            unlink(temporary)
            return reason
        }
        syncDirectory()
        return nil
    }

    /// Writes `text` as one line of `length` bytes (padded with spaces) to `path`: rewritten in place when the file
    /// has that length already, which needs no new block, so a full disk takes it; else `writeDurably`. The
    /// reason, when it could not be written.
    func writeLine(_ text: String, length: Int, to path: String) -> String? {
        var line = Array(text.utf8)
        line += [UInt8](repeating: UInt8(ascii: " "), count: max(0, length - 1 - line.count)) + [UInt8(ascii: "\n")]
        return overwriteInPlace(line, at: path) ? nil : writeDurably(line, to: path)
    }

    /// Overwrites the file at `path` with `bytes` in place and syncs it, when it holds exactly as many bytes: no
    /// new block is needed, so it works on a full disk. False when the file is missing, of another length, or a
    /// step failed.
    private func overwriteInPlace(_ bytes: [UInt8], at path: String) -> Bool {
        let descriptor = Glibc.open(path, O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, Int(info.st_size) == bytes.count else { return false }
        let written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        return written == bytes.count && fdatasync(descriptor) == 0
    }

    @discardableResult
    func syncDirectory() -> Bool {
        let descriptor = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return fsync(descriptor) == 0
    }
}

/// Why `readFile` could not read a file: the system's reason, or that it ended before its size.
struct FileReadFailure: Error, CustomStringConvertible {
    /// There is no such file (`ENOENT`), as opposed to one that cannot be read.
    let isMissing: Bool
    let description: String

    init(errno code: Int32) {
        isMissing = code == ENOENT
        description = String(cString: strerror(code))
    }

    private init(description: String) {
        isMissing = false
        self.description = description
    }

    static let endedEarly = FileReadFailure(description: "it ended before the size it had when opened")
    static let notAFile = FileReadFailure(description: "it is not a regular file")
    static let danglingLink = FileReadFailure(description: "it is a symbolic link to nothing")
}

/// Reads a whole file. A read error must not pass for a file that ends early (recovery would cut a journal's
/// records after a bad sector as a torn tail), and one that cannot be read must not pass for one that is not
/// there (recovery would report a snapshot with the wrong owner as missing).
func readFile(_ path: String) throws(FileReadFailure) -> [UInt8] {
    // Non-blocking: opening a FIFO to read waits for a writer, and a start would hang on one named as a snapshot.
    let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
    guard descriptor >= 0 else {
        let code = errno
        var link = stat()
        if code == ENOENT && lstat(path, &link) == 0 { throw .danglingLink }
        throw FileReadFailure(errno: code)
    }
    defer { close(descriptor) }
    var info = stat()
    guard fstat(descriptor, &info) == 0 else { throw FileReadFailure(errno: errno) }
    guard info.st_mode & S_IFMT == S_IFREG else { throw .notAFile }
    var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
    var offset = 0
    while offset < bytes.count {
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + offset, $0.count - offset) }
        if count < 0 && errno == EINTR { continue }
        if count < 0 { throw FileReadFailure(errno: errno) }
        guard count > 0 else { throw .endedEarly }
        offset += count
    }
    return bytes
}

/// `readFile`, nil for any failure.
func readWholeFile(_ path: String) -> [UInt8]? { try? readFile(path) }
