import Testing

@testable import Model

@Suite struct ViewDefinitionTests {
    static func parse(_ text: String) throws(ViewDefinitionError) -> ViewDefinition {
        try ViewDefinition(json: Array(text.utf8))
    }

    @Test func readsTheExampleOfTheContract() throws {
        let definition = try Self.parse(
            """
            {"source": "tasks",
             "filter": {"all": [{"field": "/done", "eq": false}, {"field": "/priority", "ge": 2}]},
             "sectionBy": {"field": "/status", "order": "asc"},
             "sortBy": [{"field": "/priority", "order": "desc"}, {"field": "/title"}],
             "limit": 100}
            """)
        #expect(definition.source == "tasks")
        #expect(definition.limit == 100)
        #expect(definition.sortBy.map(\.descending) == [true, false])
        #expect(
            definition.canonicalJSON.description
                == "{\"filter\":{\"all\":[{\"eq\":false,\"field\":\"/done\"},{\"field\":\"/priority\",\"ge\":2}]},"
                + "\"limit\":100,\"sectionBy\":{\"field\":\"/status\",\"order\":\"asc\"},\"sortBy\":[{\"field\":"
                + "\"/priority\",\"order\":\"desc\"},{\"field\":\"/title\",\"order\":\"asc\"}],\"source\":\"tasks\"}")
        #expect(try Self.parse(definition.canonicalJSON.description) == definition)
    }

    @Test func canonicalTextReadsBackEqual() throws {
        var random = RandomViews(seed: 3)
        var checked = 0
        for _ in 0..<300 {
            let definition = random.definition(source: "s")
            #expect(try Self.parse(definition.canonicalJSON.description) == definition)
            checked += 1
        }
        #expect(checked == 300)
    }

    /// An optional part given as `null` is absent (encoders that write every field send it so); `source` is not.
    @Test func optionalPartsGivenAsNullAreAbsent() throws {
        let nulls = try Self.parse(#"{"source":"s","filter":null,"sectionBy":null,"sortBy":null,"limit":null}"#)
        #expect(nulls == (try Self.parse(#"{"source":"s"}"#)))
        #expect(nulls.canonicalJSON.description == #"{"source":"s"}"#)
        #expect(throws: ViewDefinitionError.self) { try Self.parse(#"{"source":null}"#) }
        #expect(throws: ViewDefinitionError.self) { try Self.parse(#"{"source":"s","sortBy":[null]}"#) }
    }

    static let leaf = "{\"field\":\"/a\",\"eq\":1}"
    static let nested = (0..<16).reduce("{\"field\":\"/a\",\"eq\":1}") { inner, _ in "{\"not\":\(inner)}" }
    static let leaves = "[" + Array(repeating: "{\"field\":\"/a\",\"eq\":1}", count: 257).joined(separator: ",") + "]"

    @Test(arguments: [
        (
            "{\"source\":\"t\",\"filter\":{\"all\":[\(ViewDefinitionTests.leaf),\(ViewDefinitionTests.leaf),"
                + "{\"field\":\"/a\",\"eq\":1,\"lt\":2}]}}",
            "filter.all[2]: two ops in one leaf (eq, lt)"
        ),
        ("{\"source\":\"t\",\"filter\":{\"field\":\"/a\",\"like\":1}}", "filter: unknown op \"like\""),
        (
            "{\"source\":\"t\",\"filter\":{\"any\":[{\"field\":\"a\",\"eq\":1}]}}",
            "filter.any[0].field: bad pointer \"a\""
        ),
        ("{\"source\":\"t\",\"filter\":{\"field\":\"/a~2\",\"eq\":1}}", "filter.field: bad pointer \"/a~2\""),
        (
            "{\"source\":\"t\",\"filter\":\(ViewDefinitionTests.nested)}",
            "filter.not.not.not.not.not.not.not.not.not.not.not.not.not.not.not.not: nested deeper than 16"
        ),
        ("{\"source\":\"t\",\"filter\":{\"any\":\(ViewDefinitionTests.leaves)}}", "filter: 257 leaves, more than 256"),
        ("{\"source\":\"t\",\"limit\":0}", "limit: must be at least 1, got 0"),
        ("{\"source\":\"t\",\"limit\":1.5}", "limit: must be an integer"),
        ("{\"source\":\"t\",\"colour\":1}", "unknown field \"colour\""),
        ("{\"source\":\"-t\"}", "source: not a collection name: \"-t\""),
        ("{\"filter\":{}}", "source: missing"),
        (
            "{\"source\":\"t\",\"sortBy\":[{\"field\":\"/a\",\"order\":\"up\"}]}",
            "sortBy[0].order: must be \"asc\" or \"desc\""
        ),
        ("{\"source\":\"t\",\"sectionBy\":{\"field\":\"/a\",\"by\":1}}", "sectionBy: unknown field \"by\""),
        ("{\"source\":\"t\",\"filter\":{\"field\":\"/a\",\"in\":1}}", "filter.in: must be an array"),
        ("{\"source\":\"t\",\"filter\":{\"field\":\"/a\"}}", "filter: no op in leaf"),
        ("{\"source\":\"t\",\"filter\":{\"eq\":1}}", "filter.field: missing"),
        (
            "{\"source\":\"t\",\"filter\":{\"all\":[],\"any\":[]}}",
            "filter: expected a leaf or exactly one of all, any, not (found all, any)"
        ),
        ("{\"source\":", "not JSON: a value expected at byte 10"),
    ])
    func rejectsNamingThePart(text: String, message: String) {
        #expect {
            try Self.parse(text)
        } throws: { error in
            (error as? ViewDefinitionError)?.message == message
        }
    }

    /// A `limit` written as a real with no fraction is that integer, as an op's index is, and written back as one.
    @Test func aWholeRealLimitIsAnInteger() throws {
        for text in ["10.0", "1e1", "10"] {
            let definition = try Self.parse("{\"source\":\"t\",\"limit\":\(text)}")
            #expect(definition.limit == 10, "\(text)")
            #expect(String(decoding: definition.canonicalJSON.bytes, as: UTF8.self) == #"{"limit":10,"source":"t"}"#)
        }
        #expect(throws: ViewDefinitionError.self) { try Self.parse("{\"source\":\"t\",\"limit\":1e300}") }
        #expect(throws: ViewDefinitionError.self) { try Self.parse("{\"source\":\"t\",\"limit\":0.0}") }
    }

    @Test func acceptsTheLimitsExactly() throws {
        let deepest = (0..<15).reduce("{\"field\":\"/a\",\"eq\":1}") { inner, _ in "{\"not\":\(inner)}" }
        _ = try Self.parse("{\"source\":\"t\",\"filter\":\(deepest)}")
        let most = "[" + Array(repeating: "{\"field\":\"/a\",\"eq\":1}", count: 256).joined(separator: ",") + "]"
        _ = try Self.parse("{\"source\":\"t\",\"filter\":{\"all\":\(most)},\"limit\":1}")
    }

    /// The bounds on `sortBy` and on `in` lists are a server's, checked apart (`checkNewDefinition`): a definition
    /// taken before them is still read as it was.
    @Test func sortKeysAndListsAreBoundedApart() throws {
        func definition(keys: Int) throws -> ViewDefinition {
            let sortBy = (0..<keys).map { "{\"field\":\"/f\($0)\"}" }.joined(separator: ",")
            return try Self.parse("{\"source\":\"t\",\"sortBy\":[\(sortBy)]}")
        }
        try definition(keys: ViewDefinition.maximumSortKeys).checkNewDefinition()
        let tooMany = try definition(keys: ViewDefinition.maximumSortKeys + 1)
        #expect(tooMany.sortBy.count == 17)
        #expect(throws: ViewDefinitionError(part: "sortBy", reason: "17 keys, more than 16")) {
            try tooMany.checkNewDefinition()
        }
        // A field named twice orders nothing (whatever its direction), and costs a copy of its value
        // for every item.
        let repeated = try Self.parse(
            #"{"source":"t","sortBy":[{"field":""},{"field":"/a"},{"field":"","order":"desc"}]}"#)
        #expect(
            throws: ViewDefinitionError(
                part: "sortBy[2].field",
                reason: #"repeats sortBy[0]'s field "": items it ties are equal there too, so it orders nothing, "#
                    + "and each key holds a copy of its value for every item")
        ) {
            try repeated.checkNewDefinition()
        }
        #expect(throws: ViewDefinitionError.self) {
            try Self.parse(#"{"source":"t","sortBy":[{"field":"/a~1b"},{"field":"/a~1b"}]}"#).checkNewDefinition()
        }
        try Self.parse(#"{"source":"t","sortBy":[{"field":"/a"},{"field":"/a/b"},{"field":"/b"}]}"#)
            .checkNewDefinition()
        // Values of every `in` list count together.
        func lists(_ counts: [Int]) throws -> ViewDefinition {
            let leaves = counts.map { count in
                "{\"field\":\"/a\",\"in\":[" + (0..<count).map(String.init).joined(separator: ",") + "]}"
            }
            return try Self.parse("{\"source\":\"t\",\"filter\":{\"any\":[\(leaves.joined(separator: ","))]}}")
        }
        try lists([5_000, 5_000]).checkNewDefinition()
        #expect(throws: ViewDefinitionError(part: "filter", reason: "10001 values in its in lists, more than 10000")) {
            try lists([5_000, 5_001]).checkNewDefinition()
        }
    }

    /// An `lt`, `le`, `gt` or `ge` holds only between two numbers or two strings: a server refuses one whose operand
    /// is another value, which no item passes, but a definition journaled before that rule is still read.
    @Test func orderedTestsOfAnythingButNumbersAndStringsAreRefusedWhenNew() throws {
        for (operand, found) in [("null", "null"), ("true", "a boolean"), ("[1]", "an array"), ("{}", "an object")] {
            for op in ["lt", "le", "gt", "ge"] {
                let text =
                    "{\"source\":\"t\",\"filter\":{\"all\":[{\"field\":\"/a\",\"eq\":1},"
                    + "{\"not\":{\"field\":\"/a\",\"\(op)\":\(operand)}}]}}"
                let definition = try Self.parse(text)
                let reason = "must be a number or a string (it holds for no item against \(found))"
                #expect(throws: ViewDefinitionError(part: "filter.all[1].not.\(op)", reason: reason)) {
                    try definition.checkNewDefinition()
                }
            }
        }
        for operand in ["1", "-2.5e3", "\"b\""] {
            try Self.parse("{\"source\":\"t\",\"filter\":{\"field\":\"/a\",\"lt\":\(operand)}}").checkNewDefinition()
        }
        try Self.parse("{\"source\":\"t\",\"filter\":{\"field\":\"/a\",\"eq\":null}}").checkNewDefinition()
    }
}
