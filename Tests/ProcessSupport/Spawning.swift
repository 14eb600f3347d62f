import Foundation

/// Starts the tests' child processes one at a time. Foundation closes the descriptors a child would inherit by a
/// list it makes before the spawn, and the socket through which it hears of the child's exit is not close-on-exec:
/// a pipe or such a socket that another thread makes in between goes to the child too. A child holding another
/// test's pipe keeps that test's reader from ever seeing the end; one holding another child's socket keeps that
/// child's exit from being seen while it runs. So every child is started under one lock, its pipes made there.
public enum Spawning {
    private static let lock = NSLock()

    /// Starts `process`; `prepare` makes its pipes under the lock and returns what the caller keeps of them.
    @discardableResult
    public static func run<Kept>(_ process: Process, preparing prepare: () -> Kept) throws -> Kept {
        try lock.withLock {
            let kept = prepare()
            try process.run()
            return kept
        }
    }

    /// Starts `process`, which needs no new pipe.
    public static func run(_ process: Process) throws {
        try run(process) {}
    }

    /// Runs `spawn`, which starts a child without Foundation (`posix_spawn`), under the same lock.
    public static func withLock<Result>(_ spawn: () throws -> Result) rethrows -> Result {
        try lock.withLock(spawn)
    }
}
