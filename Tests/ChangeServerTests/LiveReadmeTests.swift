import Foundation
import ProcessSupport
import Testing

/// The README's curl walkthroughs, pasted as a reader would: every command runs through `sh` against a real server,
/// and prints what the README shows (`Walkthrough` says how the README is read). A change of an answer that the
/// README does not follow fails here, and so does a command that no longer works.
@Suite(.tags(.liveServer)) struct LiveReadmeTests {
    @Test(.timeLimit(.minutes(2))) func theCurlWalkthroughsPrintWhatTheReadmeShows() throws {
        let walkthroughs = try Walkthrough.all(inMarkdownAt: Repository.root.appendingPathComponent("README.md"))
        #expect(walkthroughs.count == 2, "the collections' walkthrough and the views' one")
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // curl reads its defaults from $CURL_HOME/.curlrc: a bound on every command, without changing any.
        try "max-time = 30\n".write(toFile: directory + "/.curlrc", atomically: true, encoding: .utf8)
        var server = try ServerProcess(dataDirectory: directory + "/data")
        var shown = ShownOutput()
        var steps = 0
        for walkthrough in walkthroughs {
            var held: [PastedCommand] = []
            for step in walkthrough.steps {
                steps += 1
                switch step {
                case .run(let commands, let expected, let line):
                    var outputs: [PastedCommand] = []
                    for command in commands {
                        let (text, unbound) = shown.substituted(command.text)
                        try #require(unbound == nil, "README line \(line): \(unbound ?? "") is used before it is shown")
                        let local = text.replacingOccurrences(
                            of: "http://localhost:8080", with: "http://127.0.0.1:\(server.port)")
                        let pasted = try PastedCommand(local, curlHome: directory)
                        if command.isHeld && expected == nil {
                            held.append(pasted)
                        } else {
                            if !command.isHeld { pasted.finish() }
                            outputs.append(pasted)
                        }
                    }
                    let printed = outputs.map { $0.finish() }
                    for (command, run) in zip(outputs, printed) {
                        #expect(run.status == 0, "README line \(line): \(command.text) failed: \(run.errors)")
                    }
                    if let expected {
                        let actual = printed.map(\.output).joined()
                        let matched = shown.matches(Self.normalized(actual), shown: Self.normalized(expected))
                        #expect(
                            matched,
                            "README line \(line) shows\n\(expected)\nbut the server printed\n\(actual)")
                    }
                case .expectHeld(let expected, let line):
                    try #require(!held.isEmpty, "README line \(line): output shown for no command held")
                    let actual = held.map { $0.finish().output }.joined()
                    let matched = shown.matches(Self.normalized(actual), shown: Self.normalized(expected))
                    #expect(
                        matched,
                        "README line \(line) shows\n\(expected)\nbut the held command printed\n\(actual)")
                    held = []
                case .crashAndRestart:
                    kill(server.process.processIdentifier, SIGKILL)
                    server.process.waitUntilExit()
                    server = try ServerProcess(dataDirectory: directory + "/data")
                }
            }
            #expect(held.isEmpty, "\(walkthrough.title): a held command whose output the README never shows")
        }
        #expect(steps > 20)
        #expect(shown.epochs.count == 2, "the inbox's epoch and the board's: \(shown.epochs)")
    }

    /// curl's `-i` headers end in CRLF, and a block's last line may or may not end in a newline.
    private static func normalized(_ text: String) -> String {
        var text = text.replacingOccurrences(of: "\r\n", with: "\n")
        while text.hasSuffix("\n") { text.removeLast() }
        return text
    }
}

/// A README command run through `sh`, with curl's defaults from `curlHome`.
private final class PastedCommand {
    let text: String
    private let process = Process()
    private let output: Pipe
    private let errors: Pipe
    private var result: (status: Int32, output: String, errors: String)?

    init(_ text: String, curlHome: String) throws {
        self.text = text
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", text]
        process.environment = ProcessInfo.processInfo.environment.merging(["CURL_HOME": curlHome]) { $1 }
        process.standardInput = FileHandle.nullDevice
        let process = self.process
        (output, errors) = try Spawning.run(process) {
            let pipes = (Pipe(), Pipe())
            process.standardOutput = pipes.0
            process.standardError = pipes.1
            return pipes
        }
    }

    /// Waits for the command to end: its exit status and what it printed on stdout and stderr.
    @discardableResult
    func finish() -> (status: Int32, output: String, errors: String) {
        if let result { return result }
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        let complained = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let result = (
            process.terminationStatus, String(decoding: printed, as: UTF8.self),
            String(decoding: complained, as: UTF8.self)
        )
        self.result = result
        return result
    }
}
