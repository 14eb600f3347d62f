import Foundation
import ProcessSupport

/// A throwaway PostgreSQL 15 cluster for one test: `initdb` in a temporary directory (as the unprivileged user
/// `postgres` when the tests run as root, since initdb refuses root), started on a free loopback port with
/// `fsync` and `synchronous_commit` on, and stopped (by the PID in its `postmaster.pid`) when the test is done.
final class PostgresCluster: @unchecked Sendable {
    // @unchecked: every property is set once in init; the methods run commands and touch no shared state.
    static let binaries = "/usr/lib/postgresql/15/bin"

    let port: Int
    let directory: String
    let maxConnections: Int
    private var data: String { directory + "/data" }
    private var logFile: String { directory + "/log" }

    /// The libpq URL of database `name`.
    func url(_ name: String = "postgres") -> String { "postgresql://postgres@127.0.0.1:\(port)/\(name)" }

    /// `maxConnections`: PostgreSQL's `max_connections` (every connection of the tests is a superuser's, so all of
    /// them count).
    init(maxConnections: Int = 200) throws {
        self.maxConnections = maxConnections
        directory = try ServerProcess.temporaryDirectory()
        port = try Self.freePort()
        if getuid() == 0 {
            guard let user = getpwnam("postgres") else { throw ClientError.malformed("no user postgres") }
            chown(directory, user.pointee.pw_uid, user.pointee.pw_gid)
        }
        chmod(directory, 0o700)
        try run(["\(Self.binaries)/initdb", "-D", data, "--auth=trust", "-U", "postgres", "--no-sync"])
        try start()
    }

    /// Starts the cluster (again, after `stop` or `restart` checks).
    func start() throws {
        try run([
            "\(Self.binaries)/pg_ctl", "-D", data, "-l", logFile, "-w", "-o",
            "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on "
                + "-c max_connections=\(maxConnections)",
            "start",
        ])
    }

    /// `pg_ctl restart -m fast`: every connection is cut, and the cluster comes back on the same port.
    func restart() throws {
        try run(["\(Self.binaries)/pg_ctl", "-D", data, "-l", logFile, "-w", "-m", "fast", "restart"])
    }

    /// Stops it with a fast shutdown, waiting up to 60 s for the postmaster to end (`pg_ctl stop -w`, which waits
    /// for its PID file to go: a postmaster nobody reaps stays a zombie that `kill(pid, 0)` still finds, and a
    /// shutdown checkpoint on a busy disk took longer than the 20 s once waited); by its PID if `pg_ctl` fails.
    func stop() {
        guard let pid = postmasterPID else { return }
        if (try? run(["\(Self.binaries)/pg_ctl", "-D", data, "-m", "fast", "-w", "-t", "60", "stop"])) != nil {
            return
        }
        kill(pid, SIGINT)
        let deadline = Date().addingTimeInterval(60)
        while postmasterPID != nil && Date() < deadline { usleep(20_000) }
    }

    /// The postmaster's PID, from the first line of `postmaster.pid`.
    var postmasterPID: pid_t? {
        guard let text = try? String(contentsOfFile: data + "/postmaster.pid", encoding: .utf8) else { return nil }
        return text.split(separator: "\n").first.flatMap { pid_t($0) }
    }

    /// Runs SQL with psql and returns its unaligned output.
    @discardableResult
    func sql(_ statement: String, database: String = "postgres") throws -> String {
        try run([
            "/usr/bin/psql", "-X", "-A", "-t", "-q", "-h", directory, "-p", "\(port)", "-U", "postgres",
            "-d", database, "-v", "ON_ERROR_STOP=1", "-c", statement,
        ])
    }

    /// A new empty database for one server group, returning its URL.
    func createDatabase(_ name: String) throws -> String {
        try sql("CREATE DATABASE \"\(name)\"")
        return url(name)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs a command (as `postgres` when root) with posix_spawn, its output in a file, every other descriptor
    /// closed by a shell before it starts: the postmaster that `pg_ctl` starts would otherwise keep open whatever
    /// descriptors the test process has (Foundation's `Process` waits on one of them) for as long as it runs.
    @discardableResult
    private func run(_ command: [String]) throws -> String {
        let closeOthers = #"for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done; exec "$@""#
        let argv =
            ["/bin/bash", "-c", closeOthers, "bash"]
            + (getuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--"] + command : command)
        let outputPath = directory + "/command-output"
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o666)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let arguments = argv.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        var pid: pid_t = 0
        let spawned = Spawning.withLock { posix_spawn(&pid, argv[0], &actions, nil, arguments, environ) }
        guard spawned == 0 else { throw ClientError.malformed("cannot run \(argv[0]): \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // WIFEXITED and WEXITSTATUS, which Swift does not import.
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw ClientError.malformed("\(command.joined(separator: " ")) failed (\(status)): \(text)")
        }
        return text
    }

    /// A port nothing listens on now.
    private static func freePort() throws -> Int {
        try ClosingListener.freePort()
    }
}
