import Foundation
import Testing

/// A real ChangeServer process on a free loopback port, started from the binary this test run built, and
/// stopped by its PID when the test is done.
public final class ServerProcess: @unchecked Sendable {
    // @unchecked: the log is a locked box; everything else is set once in init.
    public let process = Process()
    public let port: Int
    private let errorPipe: Pipe
    /// Signalled once, when the process exits.
    private let exited = DispatchSemaphore(value: 0)
    private let logText = LockedText()

    /// The built `ChangeServer` next to the test bundle.
    public static var binary: URL {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return executable.deletingLastPathComponent().appendingPathComponent("ChangeServer")
    }

    /// The server's `--data-dir`.
    public let dataDirectory: String
    private let ownsDataDirectory: Bool

    /// Starts a server; without `dataDirectory` it gets a fresh temporary one, removed when the test is done.
    /// `--fsync never` unless the arguments say otherwise (they come later and win).
    /// `launcher` runs the server through another program (`prlimit ...`) that execs it, keeping its PID.
    public init(
        _ arguments: [String] = [], environment: [String: String] = [:], dataDirectory: String? = nil,
        launcher: [String] = []
    ) throws {
        RunWatchdog.arm()
        let directory = try dataDirectory ?? Self.temporaryDirectory()
        self.dataDirectory = directory
        ownsDataDirectory = dataDirectory == nil
        let serverArguments =
            ["--host", "127.0.0.1", "--port", "0", "--fsync", "never", "--data-dir", directory] + arguments
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
        process.standardOutput = FileHandle.nullDevice
        process.terminationHandler = { [exited] _ in exited.signal() }
        let process = self.process
        errorPipe = try Spawning.run(process) {
            let pipe = Pipe()
            process.standardError = pipe
            return pipe
        }
        let (found, pending) = Self.readListeningPort(errorPipe.fileHandleForReading, within: Self.startTimeout)
        logText.append(pending)
        guard let port = found else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            if dataDirectory == nil { try? FileManager.default.removeItem(atPath: directory) }
            throw TestFailure("the server did not listen within \(Self.startTimeout) s: \(pending)")
        }
        self.port = port
        Self.readUntilEnd(errorPipe, into: logText)
    }

    /// Reads the rest of `stderr` on a thread of its own with blocking reads, until the end of the stream (every
    /// writer gone). Not `FileHandle.readabilityHandler`: tearing down its libdispatch read source races the
    /// descriptor's close and has crashed test processes in `_dispatch_event_loop_drain`
    /// (swift-corelibs-libdispatch#949). The thread holds the pipe, so its descriptor stays open while it reads.
    private static func readUntilEnd(_ pipe: Pipe, into log: LockedText) {
        let thread = Thread {
            let descriptor = pipe.fileHandleForReading.fileDescriptor
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(descriptor, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return log.finish() }
                log.append(String(decoding: buffer[..<count], as: UTF8.self))
            }
        }
        thread.name = "server stderr"
        thread.start()
    }

    /// The server's base URL.
    public var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// How long a server may take to print its `listening on` line.
    public static let startTimeout = 20.0

    /// Reads `stderr` until the `listening on <host>:<port>` line, its end, or `timeout` seconds, whichever comes
    /// first: each read waits (poll) only for what is left of the time, so a server that prints nothing cannot
    /// hold the test. The port (nil when none was printed in time) and everything read.
    public static func readListeningPort(_ stderr: FileHandle, within timeout: Double) -> (port: Int?, text: String) {
        let deadline = ContinuousClock.now + .seconds(timeout)
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < deadline {
            let left = deadline - ContinuousClock.now
            let milliseconds = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000
            var request = pollfd(fd: stderr.fileDescriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&request, 1, Int32(clamping: milliseconds + 1))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { break }
            let count = read(stderr.fileDescriptor, &buffer, buffer.count)
            guard count > 0 else { break }
            text += String(decoding: buffer[..<count], as: UTF8.self)
            if let range = text.range(of: #"listening on [^ ]+:(\d+)"#, options: .regularExpression) {
                return (Int(text[range].split(separator: ":").last ?? ""), text)
            }
        }
        return (nil, text)
    }

    /// Everything the server wrote to stderr so far; once it has exited (`stop`, `waitForExit`), everything.
    public var log: String { logText.value }

    /// Sends a signal and waits up to `timeout` seconds for the exit status.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeout: Double = 10) -> Int32? {
        if process.isRunning { kill(process.processIdentifier, signal) }
        return waitForExit(timeout: timeout)
    }

    /// Waits up to `timeout` seconds for the process to exit by itself; killed and nil if it does not.
    public func waitForExit(timeout: Double) -> Int32? {
        if process.isRunning && exited.wait(timeout: .now() + timeout) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            logText.waitUntilFinished(timeout: 5)
            return nil
        }
        process.waitUntilExit()
        logText.waitUntilFinished(timeout: 5)
        return process.terminationStatus
    }

    /// Starts a server from an async test on a thread of its own: start-up blocks until the server listens, and
    /// must not block a thread of the cooperative pool (two on a 2-core machine), which every async test of the run
    /// and the clients they drive share.
    public static func started(_ arguments: [String] = [], dataDirectory: String? = nil) async throws -> ServerProcess {
        try await onOwnThread { try ServerProcess(arguments, dataDirectory: dataDirectory) }
    }

    /// `stop` from an async test, on a thread of its own (it waits up to 10 s for the exit).
    @discardableResult
    public func stopped() async -> Int32? {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { [self] in continuation.resume(returning: stop()) }
        }
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        if ownsDataDirectory { try? FileManager.default.removeItem(atPath: dataDirectory) }
    }

    /// A new empty directory under the system's temporary directory.
    public static func temporaryDirectory() throws -> String {
        var template = Array((NSTemporaryDirectory() + "/changeserver-test-XXXXXX").utf8CString)
        guard let path = mkdtemp(&template) else { throw TestFailure("mkdtemp failed") }
        return String(cString: path)
    }
}

/// Text appended by one thread and read by others, until its writer says it is finished.
final class LockedText: @unchecked Sendable {
    // @unchecked: text and finished are only touched under the condition's lock.
    private let condition = NSCondition()
    private var text = ""
    private var finished = false

    func append(_ more: String) { condition.withLock { text += more } }

    func finish() {
        condition.withLock {
            finished = true
            condition.broadcast()
        }
    }

    /// Waits up to `timeout` seconds for the writer to finish (the end of the stream: a process that exited has
    /// closed its side, unless a child it started still holds it); a test fails if it does not, since its checks
    /// of the log would then read part of it.
    func waitUntilFinished(timeout: Double) {
        let deadline = Date(timeIntervalSinceNow: timeout)
        let ended = condition.withLock {
            while !finished && condition.wait(until: deadline) {}
            return finished
        }
        if !ended { Issue.record("the server's stderr did not end within \(timeout) s of its exit") }
    }

    var value: String { condition.withLock { text } }
}
