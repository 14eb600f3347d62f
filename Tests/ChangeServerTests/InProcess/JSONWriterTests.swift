import Model
import Testing

@testable import ChangeServer

/// The writer's own memory: text written past its first capacity, strings escaped in runs, integers at the ends
/// of their range.
@Suite struct InProcessJSONWriterTests {
    /// Each byte escaped as JSON requires, one at a time: what `string` must match.
    private func reference(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case "\u{08}": result += "\\b"
            case "\u{0C}": result += "\\f"
            case let control where control.value < 0x20:
                result += "\\u00" + String(control.value >> 4, radix: 16) + String(control.value & 0xF, radix: 16)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    @Test func stringsAreEscapedExactlyAndTheMemoryGrows() {
        var random = SplitMix64(seed: 3)
        let alphabet = Array("ab\"\\\n\r\t\u{08}\u{0C}\u{01}\u{1F} é😀/".unicodeScalars)
        var writer = JSONWriter(capacity: 16)
        var expected = ""
        for length in [0, 1, 2, 15, 16, 17, 255, 256, 1_000, 70_000] {
            var text = ""
            for _ in 0..<length { text.unicodeScalars.append(alphabet[Int(random.next() % UInt64(alphabet.count))]) }
            writer.string(text)
            expected += reference(text)
        }
        #expect(String(decoding: writer.bytes, as: UTF8.self) == expected)
    }

    @Test func integersAreWrittenInFull() {
        var writer = JSONWriter(capacity: 1)
        writer.array([Int.min, -1, 0, 9, 10, Int.max]) { $0.integer($1) }
        #expect(String(decoding: writer.bytes, as: UTF8.self) == "[\(Int.min),-1,0,9,10,\(Int.max)]")
    }
}
