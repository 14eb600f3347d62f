import Model
import Testing

@testable import ChangeServer

/// Request bodies read into Model's values: the canonical data, and errors that name the JSON path that is wrong,
/// however deep (paths are made only for an error).
@Suite struct InProcessRequestDecodingTests {
    /// The error `decode` throws for `text`, nil when it reads it.
    private func error<Value>(_ decode: ([UInt8]) throws(HTTPError) -> Value, _ text: String) -> HTTPError? {
        do {
            _ = try decode(Array(text.utf8))
            return nil
        } catch {
            return error
        }
    }

    private func opsError(_ text: String) -> HTTPError? { error(RequestDecoding.ops, text) }

    private func upsertError(_ text: String) -> HTTPError? { error(RequestDecoding.upsert, text) }

    @Test func anUpsertReadsItsDataInCanonicalForm() throws {
        let upsert = try RequestDecoding.upsert(
            Array(#"{"index": 2, "data": {"z": "a\u0062", "a": [1.0, "\""]}}"#.utf8))
        #expect(String(decoding: upsert.data.bytes, as: UTF8.self) == #"{"a":[1.0,"\""],"z":"ab"}"#)
        #expect(upsert.index == 2)
        #expect(upsert.section == nil)
    }

    @Test(arguments: [
        (
            #"{"ops":[{"op":"moveSection","section":0,"to":1},{"op":"insertItems","at":[0,0],"items":[{"id":7}]}]}"#,
            "ops[1].items[0].id must be a string.", 1
        ),
        (
            #"{"ops":[{"op":"insertSections","at":0,"sections":[{"id":"s","items":[{"id":"a"},{"id":"b","x":1}]}]}]}"#,
            #"ops[0].sections[0].items[1] has an unknown field "x"; it takes "data", "id"."#, 0
        ),
        (
            #"{"ops":[{"op":"updateItems","items":[{"id":"a","data":1},{"data":2}]}]}"#,
            #"ops[0].items[1] needs the field "id"."#, 0
        ),
        (#"{"ops":[{"op":"deleteItems","items":[[0,"x"]]}]}"#, "ops[0].items[0][1] must be an integer.", 0),
    ])
    func anErrorNamesItsPathAndOp(_ body: String, _ message: String, _ op: Int) {
        let error = opsError(body)
        #expect(error?.code == .badRequest)
        #expect(error?.message == message)
        #expect(error?.opIndex == op)
    }

    /// API.md: "In requests `data` may be left out (it is then `null`)", in `updateItems` as in `updateSection`.
    @Test func anUpdateWithoutDataSetsNull() throws {
        let ops = try RequestDecoding.ops(
            Array(#"{"ops":[{"op":"updateItems","items":[{"id":"a"}]},{"op":"updateSection","section":0}]}"#.utf8))
        #expect(ops == [.updateItems([Item(id: "a", data: .null)]), .updateSection(.index(0), data: .null)])
    }

    @Test func anUnknownFieldOfTheBodyIsNamed() {
        #expect(
            upsertError(#"{"data":1,"extra":2}"#)?.message
                == #"the body has an unknown field "extra"; it takes "data", "index", "section"."#)
        #expect(opsError(#"{"ops":[],"more":1}"#)?.message == #"the body has an unknown field "more"; it takes "ops"."#)
    }
}
