import Foundation
import Testing

/// A program a test runs to its end (node, Python, a script) with everything it starts: its output, its exit status
/// (nil when it ran past its time or a signal killed it), and the processes it left running, which are killed.
///
/// Why not `Process.waitUntilExit()`: Foundation learns that a child exited only when every process holding the
/// socket it hands the child has closed it, so a server or nginx that node started and left running keeps
/// `terminationHandler` from firing and `waitUntilExit()` from returning, for ever (the likely cause of a CI run
/// that hung past its 90 minutes: node, timed out and killed, left its servers behind). So the program's end is
/// also looked for in `/proc`. Foundation starts each child in a process group of its own: when the program ran
/// past its time, or ended with members of its group still running, the whole group is killed by its ID, which
/// stays taken while the group has a member. With SIGKILL at once: a child inherits the signal mask of the test
/// thread that started it, in which SIGTERM is blocked. Every wait here is bounded.
public struct ProgramRun: Sendable {
    /// The exit status; nil when the program ran past its time or was killed by a signal.
    public var status: Int32?
    /// Standard output and error together.
    public var output: String
    /// The command lines of processes the program started and left running after it ended (killed since).
    public var leftRunning: [String]

    /// Runs `arguments` (looked up on `PATH`) in `directory`, killed with every process it started after `timeout`
    /// seconds.
    public static func run(
        _ arguments: [String], in directory: URL, environment: [String: String] = [:], timeout: Double
    ) throws -> ProgramRun {
        RunWatchdog.arm()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let folder = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let logPath = folder + "/output.log"
        try #require(FileManager.default.createFile(atPath: logPath, contents: nil))
        let ended = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in ended.signal() }
        process.standardInput = FileHandle.nullDevice
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardOutput = log
        process.standardError = log
        do {
            defer { try? log.close() }
            try Spawning.run(process)
        }
        let group = process.processIdentifier
        let deadline = ContinuousClock.now + .seconds(timeout)
        var timedOut = false
        var reaped = false
        // The program's own end is seen in `/proc` too (a zombie, or gone once Foundation reaped it): Foundation's
        // handler waits for the group as well while a process of it holds the socket.
        while !reaped && ProcessTable.isRunning(group) && !timedOut {
            reaped = ended.wait(timeout: .now() + 0.2) == .success
            timedOut = !reaped && ContinuousClock.now >= deadline
        }
        // While the group has a member, its ID stays taken, so killing by it cannot reach another process.
        let left = ProcessTable.members(ofGroup: group).filter { $0.pid != group }
        if timedOut || !left.isEmpty {
            kill(-group, SIGKILL)
        }
        if !reaped && ended.wait(timeout: .now() + 10) == .timedOut {
            Issue.record("\(arguments.joined(separator: " ")): its process group outlived SIGKILL by 10 s")
        }
        let output = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        let killedBy = process.isRunning || process.terminationReason == .exit ? nil : process.terminationStatus
        return ProgramRun(
            status: timedOut || process.isRunning || killedBy != nil ? nil : process.terminationStatus,
            output: (timedOut ? "timed out after \(timeout) s\n" : "")
                + (killedBy.map { "killed by signal \($0)\n" } ?? "")
                + output,
            leftRunning: left.map(\.command))
    }
}

/// What `/proc` tells of other processes.
public enum ProcessTable {
    /// Whether `pid` has exited and waits to be reaped.
    public static func isZombie(_ pid: pid_t) -> Bool { fields(of: pid)?.state == "Z" }

    /// Whether `pid` runs: neither a zombie nor gone.
    public static func isRunning(_ pid: pid_t) -> Bool { fields(of: pid).map { $0.state != "Z" } ?? false }

    /// The live (not zombie) processes of process group `group`, with their command lines.
    public static func members(ofGroup group: pid_t) -> [(pid: pid_t, command: String)] {
        all().filter { $0.group == group }.map { ($0.pid, $0.command) }
    }

    /// The live processes `ancestor` started and the ones they started, and so on, with their command lines.
    public static func descendants(of ancestor: pid_t) -> [(pid: pid_t, command: String)] {
        let processes = all()
        var found: Set<pid_t> = [ancestor]
        var grew = true
        while grew {
            let before = found.count
            for process in processes where found.contains(process.parent) { found.insert(process.pid) }
            grew = found.count > before
        }
        return processes.filter { $0.pid != ancestor && found.contains($0.pid) }.map { ($0.pid, $0.command) }
    }

    /// Every live (not zombie) process, with its parent, group and command line.
    private static func all() -> [(pid: pid_t, parent: pid_t, group: pid_t, command: String)] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry in
            guard let pid = pid_t(entry), let fields = fields(of: pid), fields.state != "Z" else { return nil }
            let raw = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))) ?? Data()
            let command = String(decoding: raw.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
            // Empty while the process execs or exits: its name from `stat` then.
            return (pid, fields.parent, fields.group, "\(pid): \(command.isEmpty ? "(\(fields.name))" : command)")
        }
    }

    /// The name, state, parent and process group of `pid` from `/proc/PID/stat`, whose second field (the command name, in
    /// parentheses) may itself hold spaces and parentheses: the fields are read after its last `)`.
    private static func fields(of pid: pid_t) -> (name: Substring, state: Substring, parent: pid_t, group: pid_t)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")")
        else { return nil }
        let rest = text[text.index(after: close)...].split(separator: " ")
        guard rest.count > 2, let parent = pid_t(rest[1]), let group = pid_t(rest[2]) else { return nil }
        return (text[text.index(after: open)..<close], rest[0], parent, group)
    }
}
