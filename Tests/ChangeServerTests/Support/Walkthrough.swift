import Foundation
import ProcessSupport

/// A curl walkthrough of the README, read as the steps a reader pastes: the commands of each `sh` block, and the
/// output the README shows for them.
///
/// How the README is read:
/// - A walkthrough is every heading titled "A walkthrough with curl", up to the next heading.
/// - In an `sh` block, a line starting with `curl` starts a command; other lines continue it.
/// - A command marked `# held until ...` is one the reader runs in another terminal: it runs in the background.
/// - A block right after an `sh` block is what its commands print, in order. A block after prose is what the held
///   commands still running print (the subscriber's terminal).
/// - Prose that says `kill -9` is a crash and a start on the same `--data-dir`.
struct Walkthrough {
    enum Step {
        case run(commands: [Command], expected: String?, line: Int)
        case expectHeld(String, line: Int)
        case crashAndRestart(line: Int)
    }

    struct Command {
        let text: String
        var isHeld: Bool { text.contains("# held until") }
    }

    let title: String
    let steps: [Step]

    static let heading = "A walkthrough with curl"

    /// Every walkthrough of the README at `path`, in order.
    static func all(inMarkdownAt path: URL) throws -> [Walkthrough] {
        let lines = try String(contentsOf: path, encoding: .utf8).components(separatedBy: "\n")
        var walkthroughs: [Walkthrough] = []
        var index = 0
        while index < lines.count {
            guard lines[index].hasPrefix("#"), lines[index].hasSuffix(" " + heading) else {
                index += 1
                continue
            }
            let start = index + 1
            var end = start
            while end < lines.count && !lines[end].hasPrefix("#") { end += 1 }
            walkthroughs.append(
                try Walkthrough(title: lines[index], lines: Array(lines[start..<end]), firstLine: start + 1))
            index = end
        }
        return walkthroughs
    }

    private init(title: String, lines: [String], firstLine: Int) throws {
        self.title = title
        var steps: [Step] = []
        var index = 0
        var lastWasCommands = false
        while index < lines.count {
            let line = lines[index]
            let lineNumber = firstLine + index
            guard line.hasPrefix("```") else {
                if line.contains("kill -9") { steps.append(.crashAndRestart(line: lineNumber)) }
                if !line.isEmpty { lastWasCommands = false }
                index += 1
                continue
            }
            let language = line.dropFirst(3)
            var body: [String] = []
            index += 1
            while index < lines.count && lines[index] != "```" {
                body.append(lines[index])
                index += 1
            }
            guard index < lines.count else { throw TestFailure("README line \(lineNumber): a block never closed") }
            index += 1
            if language == "sh" {
                steps.append(.run(commands: Self.commands(in: body), expected: nil, line: lineNumber))
                lastWasCommands = true
            } else if lastWasCommands, case .run(let commands, nil, let at) = steps.last {
                steps[steps.count - 1] = .run(commands: commands, expected: body.joined(separator: "\n"), line: at)
                lastWasCommands = false
            } else {
                steps.append(.expectHeld(body.joined(separator: "\n"), line: lineNumber))
            }
        }
        self.steps = steps
    }

    private static func commands(in body: [String]) -> [Command] {
        var commands: [String] = []
        for line in body where !line.isEmpty {
            if line.hasPrefix("curl ") || commands.isEmpty {
                commands.append(line)
            } else {
                commands[commands.count - 1] += "\n" + line
            }
        }
        return commands.map(Command.init)
    }
}

/// What the README shows, as a pattern for what a run prints: the README's epochs stand for the run's own (the
/// first appearance of each binds it), a `Date:` header for any date, and a poll's `cursor=` for any count.
struct ShownOutput {
    /// Epochs the README made up, and the ones this run's server chose in their place.
    var epochs: [String: String] = [:]

    /// What a run may print otherwise: an epoch (12 characters of the alphabet the server draws from, before
    /// `.<seq>`), a `Date:` header, a poll's `cursor=`.
    private static let tokens = try! NSRegularExpression(
        pattern: #"\b[A-Za-z0-9]{12}(?=\.\d)|^Date: [^\n]*$|cursor=\d+"#, options: [.anchorsMatchLines])

    /// `text` with the README's epochs replaced by the run's, or the first epoch no output has shown yet.
    func substituted(_ text: String) -> (text: String, unbound: String?) {
        var result = text
        for match in Self.matches(in: text).reversed() where Self.isEpoch(match.text) {
            guard let actual = epochs[match.text] else { return (text, match.text) }
            result.replaceSubrange(Range(match.range, in: result)!, with: actual)
        }
        return (result, nil)
    }

    /// Whether `actual` is what the README shows as `shown`; binds the epochs seen for the first time.
    mutating func matches(_ actual: String, shown: String) -> Bool {
        var pattern = "^"
        var groups: [String: Int] = [:]
        var cursor = shown.startIndex
        for match in Self.matches(in: shown) {
            let range = Range(match.range, in: shown)!
            pattern += NSRegularExpression.escapedPattern(for: String(shown[cursor..<range.lowerBound]))
            cursor = range.upperBound
            switch match.text {
            case _ where Self.isEpoch(match.text):
                if let actual = epochs[match.text] {
                    pattern += NSRegularExpression.escapedPattern(for: actual)
                } else if let group = groups[match.text] {
                    pattern += "\\\(group)"
                } else {
                    groups[match.text] = groups.count + 1
                    pattern += "([A-Za-z0-9_-]{1,32})"
                }
            case _ where match.text.hasPrefix("Date: "): pattern += "Date: [^\\n]*"
            default: pattern += "cursor=\\d+"
            }
        }
        pattern += NSRegularExpression.escapedPattern(for: String(shown[cursor...])) + "$"
        guard let expression = try? NSRegularExpression(pattern: pattern),
            let found = expression.firstMatch(in: actual, range: NSRange(actual.startIndex..., in: actual))
        else { return false }
        for (epoch, group) in groups {
            epochs[epoch] = String(actual[Range(found.range(at: group), in: actual)!])
        }
        return true
    }

    private static func isEpoch(_ token: String) -> Bool {
        token.count == 12 && token.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
    }

    private static func matches(in text: String) -> [(text: String, range: NSRange)] {
        tokens.matches(in: text, range: NSRange(text.startIndex..., in: text)).map {
            (String(text[Range($0.range, in: text)!]), $0.range)
        }
    }
}
