import Foundation
import Model
import ProcessSupport
import Testing

@testable import ChangeServer

/// `openapi.yaml`'s patterns for a write's `If-Match` and `If-None-Match` say exactly which values the server takes
/// and which it refuses with `400` (`App.conditions`): where they were bare strings, schemathesis generated values
/// the document allowed and the server refused, and warned that the document was looser than the API.
@Suite struct InProcessConditionPatternTests {
    /// The pieces values are made of: versions with and without quotes and weak marks, the wildcard and
    /// separators, then near misses (a leading zero, no sequence, no epoch, a byte outside the epoch's alphabet, a
    /// sequence past 64 bits, a quoted wildcard). Half the values are made of the first ones alone, most of which
    /// the server takes.
    static let pieces = [
        "*", "E.3", "abc_DEF-1.0", "\"e.12\"", "W/\"e.1\"", ",", ", ", " ", "\t",
        "W/", "\"", "e.03", "e.", ".3", "x", "é", "W", "/", ";q=1", "e.18446744073709551616", "\"*\"",
        String(repeating: "z", count: 33) + ".1",
    ]
    static let wellFormedPieces = 9

    @Test(arguments: [("IfMatch", "If-Match"), ("WriteIfNoneMatch", "If-None-Match")])
    func theContractsPatternIsWhatTheServerTakes(parameter: String, header: String) throws {
        let pattern = try NSRegularExpression(pattern: Self.pattern(ofParameter: parameter))
        var generator = SplitMix64(seed: 20_261_207)
        var taken = 0
        var refused = 0
        for _ in 0..<20_000 {
            let count = Int(generator.next() % 7)
            let choices = UInt64(generator.next() % 2 == 0 ? Self.wellFormedPieces : Self.pieces.count)
            let value = (0..<count).map { _ in Self.pieces[Int(generator.next() % choices)] }.joined()
            let whole = NSRange(value.startIndex..., in: value)
            let described = pattern.firstMatch(in: value, range: whole)?.range == whole
            let request = Request(method: "PUT", path: "/v1/collections/a", headers: [(header.lowercased(), value)])
            let isTaken: Bool
            do throws(HTTPError) {
                _ = try App.conditions(request)
                isTaken = true
            } catch {
                isTaken = error.status != .badRequest
            }
            #expect(described == isTaken, "\(header): \(value.debugDescription)")
            if isTaken { taken += 1 } else { refused += 1 }
        }
        // Both sides of the line are well covered, so that the comparison cannot pass by one side alone.
        #expect(taken > 2_000 && refused > 2_000, "taken \(taken), refused \(refused)")
    }

    /// The `pattern` of a parameter under `components.parameters`, as the document writes it (single-quoted).
    static func pattern(ofParameter name: String) throws -> String {
        let contract = try String(contentsOf: Repository.root.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        let start = try #require(contract.range(of: "\n    \(name):\n"))
        let next = contract.range(
            of: "\n    [A-Za-z]", options: .regularExpression, range: start.upperBound..<contract.endIndex)
        let block = contract[start.upperBound..<(next?.lowerBound ?? contract.endIndex)]
        let line = try #require(block.range(of: "        pattern: '"))
        let end = try #require(block[line.upperBound...].range(of: "'\n"))
        return String(block[line.upperBound..<end.lowerBound])
    }
}
