import Foundation

/// A real ChangeServer process on a free loopback port, started from the binary this test run built, and
/// stopped by its PID when the test is done.
final class ServerProcess: @unchecked Sendable {
    // @unchecked: the log text is guarded by logLock; everything else is set once in init.
    let process = Process()
    let port: Int
    private let errorPipe = Pipe()
    private let logLock = NSLock()
    private var logText = ""

    /// The built `ChangeServer` next to the test bundle.
    static var binary: URL {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return executable.deletingLastPathComponent().appendingPathComponent("ChangeServer")
    }

    /// The server's `--data-dir`.
    let dataDirectory: String
    private let ownsDataDirectory: Bool

    /// Starts a server; without `dataDirectory` it gets a fresh temporary one, removed when the test is done.
    /// `--fsync never` unless the arguments say otherwise (they come later and win).
    /// `launcher` runs the server through another program (`prlimit ...`) that execs it, keeping its PID.
    init(
        _ arguments: [String] = [], environment: [String: String] = [:], dataDirectory: String? = nil,
        launcher: [String] = []
    ) throws {
        if let dataDirectory {
            self.dataDirectory = dataDirectory
            ownsDataDirectory = false
        } else {
            self.dataDirectory = try Self.temporaryDirectory()
            ownsDataDirectory = true
        }
        let serverArguments =
            ["--host", "127.0.0.1", "--port", "0", "--fsync", "never", "--data-dir", self.dataDirectory] + arguments
        if let program = launcher.first {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = launcher.dropFirst() + [Self.binary.path] + serverArguments
        } else {
            process.executableURL = Self.binary
            process.arguments = serverArguments
        }
        var variables = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("CHANGESERVER_") }
        variables.merge(environment) { $1 }
        process.environment = variables
        process.standardError = errorPipe
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        var found: Int?
        let deadline = Date().addingTimeInterval(20)
        let handle = errorPipe.fileHandleForReading
        var pending = ""
        while found == nil && Date() < deadline && process.isRunning {
            let data = handle.availableData
            if data.isEmpty { break }
            pending += String(decoding: data, as: UTF8.self)
            if let range = pending.range(of: #"listening on [^ ]+:(\d+)"#, options: .regularExpression) {
                found = Int(pending[range].split(separator: ":").last ?? "")
            }
        }
        logText = pending
        guard let port = found else {
            if process.isRunning { process.terminate() }
            throw ClientError.malformed("the server did not start: \(pending)")
        }
        self.port = port
        handle.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.logLock.withLock { self.logText += String(decoding: data, as: UTF8.self) }
        }
    }

    var client: Client { Client(port: port) }

    /// Everything the server wrote to stderr so far.
    var log: String { logLock.withLock { logText } }

    /// Sends a signal and waits up to `timeout` seconds for the exit status.
    @discardableResult
    func stop(signal: Int32 = SIGTERM, timeout: Double = 10) -> Int32? {
        guard process.isRunning else { return process.terminationStatus }
        kill(process.processIdentifier, signal)
        return waitForExit(timeout: timeout)
    }

    /// Waits up to `timeout` seconds for the process to exit by itself; killed and nil if it does not.
    func waitForExit(timeout: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        return process.terminationStatus
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        errorPipe.fileHandleForReading.readabilityHandler = nil
        if ownsDataDirectory { try? FileManager.default.removeItem(atPath: dataDirectory) }
    }

    /// A new empty directory under the system's temporary directory.
    static func temporaryDirectory() throws -> String {
        var template = Array((NSTemporaryDirectory() + "/changeserver-test-XXXXXX").utf8CString)
        guard let path = mkdtemp(&template) else { throw ClientError.malformed("mkdtemp failed") }
        return String(cString: path)
    }
}
