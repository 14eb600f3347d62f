import Testing

@testable import Model

@Suite struct JSONTests {
    @Test(arguments: [
        ("{\"b\":1,\"a\":[true,null,\"x\"]}", "{\"a\":[true,null,\"x\"],\"b\":1}"),
        (" [ 1.0 , -0 , 2e3 ] ", "[1.0,-0,2e3]"),
        ("\"a\\u00e9\\n\\\"\\/\\ud83d\\ude00\"", "\"aé\\n\\\"/😀\""),
        ("{\"é\":1,\"z\":2,\"Z\":3}", "{\"Z\":3,\"z\":2,\"é\":1}"),
        ("\"\\u0001\"", "\"\\u0001\""),
    ])
    func canonicalText(input: String, canonical: String) throws {
        let value = try JSON(parsing: Array(input.utf8))
        #expect(value.description == canonical)
        #expect(try JSON(parsing: value.canonicalText) == value)
    }

    @Test(arguments: [
        "", "{", "[1,]", "{\"a\"}", "01", "1.", "-", "tru", "\"\\x\"", "\"\\ud800\"", "1 2", "{\"a\":1,\"a\":2}",
    ])
    func rejectsInvalidText(input: String) {
        #expect(throws: JSON.ParseError.self) { try JSON(parsing: Array(input.utf8)) }
    }

    @Test func rejectsDeepNesting() {
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(throws: JSON.ParseError.self) { try JSON(parsing: Array(deep.utf8)) }
    }

    static let document = "{\"a\":{\"b\":[10,{\"c\":\"d\"}]},\"m~n\":1,\"x/y\":2,\"\":3,\"e\\\"q\":4,\"sp ace\":5}"

    @Test(arguments: [
        ("", document), ("/a/b/0", "10"), ("/a/b/1/c", "\"d\""), ("/m~0n", "1"), ("/x~1y", "2"), ("/", "3"),
        ("/e\"q", "4"), ("/sp ace", "5"), ("/a/b", "[10,{\"c\":\"d\"}]"),
    ])
    func pointerFindsValues(pointer: String, expected: String) throws {
        let bytes = try JSON(parsing: Array(JSONTests.document.utf8)).canonicalText
        let found = try #require(JSONPointer(pointer))
        let range = try #require(found.locate(in: bytes))
        let value = try JSON(parsing: Array(bytes[range]))
        #expect(value == (try JSON(parsing: Array(expected.utf8))))
        #expect(found.evaluate(in: try JSON(parsing: bytes)) == value)
    }

    @Test(arguments: ["/a/b/2", "/a/b/01", "/a/b/-", "/a/c", "/zz", "/a/b/0/x", "/m~1n"])
    func pointerMisses(pointer: String) throws {
        let bytes = try JSON(parsing: Array(JSONTests.document.utf8)).canonicalText
        let found = try #require(JSONPointer(pointer))
        #expect(found.locate(in: bytes) == nil)
        #expect(found.evaluate(in: try JSON(parsing: bytes)) == nil)
    }

    @Test(arguments: ["a", "/a~", "/a~2", "~0"])
    func badPointers(text: String) {
        #expect(JSONPointer(text) == nil)
    }

    /// The order keys sort as the naive order of the tests, both ways, on every pair of a set of values.
    @Test func orderKeysFollowTheOrderOfValues() throws {
        var values =
            RandomViews.scalars + [
                .number("10"), .number("9.99"), .number("1e2"), .number("-2.5"), .number("123456789012345678"),
                .string("a\u{0}b"), .string("a"), .string("\u{0}"), .string("ab"), .string("a\\b"), .string("\t"),
                .array([.null]), .array([.number("1"), .number("2")]), .object([:]), .object(["a": .null]),
            ]
        values.append(.object(["k": .array([])]))
        var checked = 0
        for a in values {
            for b in values {
                for descending in [false, true] {
                    let (left, right) = (key(a, descending), key(b, descending))
                    let expected = descending ? NaiveView.less(b, a) : NaiveView.less(a, b)
                    #expect(OrderKey.less(left, right) == expected, "\(a) \(b) descending \(descending)")
                    #expect((a < b) == NaiveView.less(a, b), "\(a) < \(b)")
                    checked += 1
                }
            }
        }
        #expect(checked == values.count * values.count * 2)
    }

    /// Sort keys, unlike section keys, are equal for numbers of equal value (`1`, `1.0`, `10e-1`), so that the
    /// item id breaks the tie; numbers past 2^53 and long decimals are ordered exactly, as written.
    @Test func sortKeysOrderNumbersExactlyAndTieOnEqualValues() throws {
        let values: [JSON] =
            RandomViews.scalars + [
                .number("10e-1"), .number("0.1e1"), .number("100"), .number("1e2"), .number("9007199254740993"),
                .number("9007199254740992"), .number("-9007199254740993"), .number("0.30000000000000001"),
                .number("0.3"), .number("-0.0"), .number("0e5"), .number("1.5E+3"), .number("1500.000"),
            ]
        for a in values {
            for b in values {
                for descending in [false, true] {
                    let (left, right) = (key(a, descending, byText: false), key(b, descending, byText: false))
                    let order = NaiveView.order(a, b) * (descending ? -1 : 1)
                    #expect(OrderKey.less(left, right) == (order < 0), "\(a) \(b) descending \(descending)")
                    #expect((left == right) == (order == 0), "\(a) \(b) descending \(descending)")
                }
            }
        }
    }

    /// The order key of `value` alone.
    private func key(_ value: JSON, _ descending: Bool, byText: Bool = true) -> [UInt8] {
        var key: [UInt8] = []
        let text = value.canonicalText
        OrderKey.append(text.indices, of: text, descending: descending, byText: byText, to: &key)
        return key
    }
}
