import Foundation
import Model
import Testing

@testable import ChangeServer

/// The request parser: what it accepts reads back as Foundation reads it, what it refuses is `bad_json`, and its
/// memory is a small multiple of the text.
@Suite struct InProcessJSONParserTests {
    private func parse(_ text: String) throws(HTTPError) -> [UInt8] {
        let document = try JSONDocument(parsing: Array(text.utf8))
        return try document.withRoot { root in
            var writer = JSONWriter()
            writer.canonical(root)
            return writer.bytes
        }
    }

    @Test(arguments: [
        (
            #" {"b": [1, -2, 3.5, 1e2, true, false, null], "a": "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"} "#,
            #"{"a":"x\"\\/\b\f\n\r\té😀","b":[1,-2,3.5,100.0,true,false,null]}"#
        ),
        ("-0", "0"), ("0.0", "0.0"), ("0e-400", "0.0"), ("-0.000e5", "-0.0"),
        ("9223372036854775807", "9223372036854775807"),
        ("-9223372036854775808", "-9223372036854775808"), (#""\u0041""#, #""A""#), ("[]", "[]"), ("{}", "{}"),
        (#"{"k":{"k":1}}"#, #"{"k":{"k":1}}"#),
        // Keys are sorted as decoded, not as they stand in the text (where `\n` and `\u0063` come before `b`).
        (#"{"b":1,"\u0063":2,"\n":3}"#, #"{"\n":3,"b":1,"c":2}"#),
        (
            #"{"b":1,"a\u0062":2,"é":3,"A":[4,{"y":"\"q\"","x":"\u0001"}]}"#,
            #"{"A":[4,{"x":"\u0001","y":"\"q\""}],"ab":2,"b":1,"é":3}"#
        ),
    ])
    func acceptsJSON(_ text: String, _ canonical: String) throws {
        #expect(String(decoding: try parse(text), as: UTF8.self) == canonical)
    }

    @Test(arguments: [
        "", " ", "{", "[1,]", "[1 2]", #"{"a" 1}"#, #"{"a":1,}"#, "01", "1.", ".5", "-", "1e", "+1", "tru", "nul",
        #""\u0000""#, #""\ud800""#, #""\udc00""#, #""\ud800\u0041""#, #""\x""#, "\"a\u{01}\"", #"{"a":1,"a":2}"#,
        #"{"a":1,"\u0061":2}"#, "9223372036854775808", "-9223372036854775809", "1e400", "[1] x", "\"abc",
        "1e-400", "-2.5e-400", "0.0000001e-330",
    ])
    func refusesWhatIsNotJSON(_ text: String) {
        #expect(throws: HTTPError.self) { try parse(text) }
    }

    @Test func refusesInvalidUTF8() {
        for bytes: [UInt8] in [
            [0x22, 0xFF, 0x22], [0x22, 0xC0, 0x80, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22],
            [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], [0x22, 0xE2, 0x82, 0x22],
        ] {
            #expect(throws: HTTPError.self) { _ = try JSONDocument(parsing: bytes) }
        }
    }

    @Test func nestsUpToTheLimit() throws {
        let deepest = JSONDocument.maximumDepth
        _ = try parse(String(repeating: "[", count: deepest) + String(repeating: "]", count: deepest))
        #expect(throws: HTTPError.self) {
            try parse(String(repeating: "[", count: deepest + 1) + String(repeating: "]", count: deepest + 1))
        }
    }

    /// Random documents written by Foundation read back equal through the tape.
    @Test func readsWhatFoundationWrites() throws {
        var random = SplitMix64(seed: 14)
        func value(_ depth: Int) -> Any {
            switch random.next() % (depth > 3 ? 4 : 6) {
            case 0: return Int(truncatingIfNeeded: random.next()) >> (random.next() % 60)
            case 1:
                return String(
                    decoding: (0..<(random.next() % 8)).map { _ in UInt8(0x20 + random.next() % 90) }, as: UTF8.self)
                    + "é\n"
            case 2: return random.next() % 2 == 0
            case 3: return NSNull()
            case 4: return (0..<(random.next() % 4)).map { _ in value(depth + 1) }
            default:
                return Dictionary(uniqueKeysWithValues: (0..<(random.next() % 4)).map { ("k\($0)", value(depth + 1)) })
            }
        }
        var checked = 0
        for _ in 0..<300 {
            let original = ["v": value(0)]
            let text = try JSONSerialization.data(withJSONObject: original)
            let canonical = try parse(String(decoding: text, as: UTF8.self))
            let reread = try JSONSerialization.jsonObject(with: Data(canonical)) as? NSDictionary
            #expect(reread == original as NSDictionary)
            checked += 1
        }
        #expect(checked == 300)
    }

    /// A body of empty objects, the densest in values after `[0,0,…]`, costs its nodes and no more.
    @Test func memoryIsASmallMultipleOfTheBody() throws {
        let count = 1 << 18
        let body = Array(("[" + Array(repeating: "{}", count: count).joined(separator: ",") + "]").utf8)
        let tape = try JSONTape(parsing: body)
        #expect(tape.nodes.count == count + 1)
        // The parser reserves exactly the nodes; malloc may round a block this large up by a few pages (an extra
        // 320 nodes were seen once, in CI), where growing by doubling would add megabytes.
        let slack = (tape.nodes.capacity - (count + 1)) * MemoryLayout<JSONNode>.stride
        #expect(slack <= 64 * 1024, "\(slack) bytes more than the nodes")
        #expect(tape.nodes.capacity * MemoryLayout<JSONNode>.stride <= 5 * body.count)
    }
}
