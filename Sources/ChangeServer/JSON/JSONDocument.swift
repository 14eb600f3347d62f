import CJansson

/// A JSON document parsed by jansson and owned by Swift: the root's reference is released exactly once, when the
/// document goes away. Values inside it are read through `JSONValue`, which borrows from the document.
struct JSONDocument: ~Copyable {
    private let root: UnsafeMutablePointer<json_t>

    /// The deepest nesting of arrays and objects a request may carry.
    static let maximumDepth = 64

    /// Parses a whole body: malformed JSON, invalid UTF-8, duplicate keys, integers that do not fit in 64 bits,
    /// reals that overflow, NUL characters and nesting deeper than `maximumDepth` are all `bad_json`.
    init(parsing bytes: [UInt8]) throws(HTTPError) {
        var error = json_error_t()
        let parsed = bytes.withUnsafeBufferPointer { buffer in
            buffer.baseAddress.flatMap { base in
                base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    json_loadb($0, buffer.count, cjansson_parse_flags(), &error)
                }
            }
        }
        guard let parsed else {
            let reason = withUnsafeBytes(of: &error.text) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            let detail = bytes.isEmpty ? "the body is empty" : "\(reason) (line \(error.line), column \(error.column))"
            throw .badJSON(detail)
        }
        guard JSONValue(parsed).depth(limit: Self.maximumDepth) <= Self.maximumDepth else {
            cjansson_decref(parsed)
            throw .badJSON("it nests arrays and objects deeper than \(Self.maximumDepth) levels")
        }
        root = parsed
    }

    deinit { cjansson_decref(root) }

    /// Reads the document's root; the value must not outlive the document.
    func withRoot<Result>(_ body: (JSONValue) throws(HTTPError) -> Result) throws(HTTPError) -> Result {
        try body(JSONValue(root))
    }
}

/// A value inside a `JSONDocument`, borrowed: valid only while the document lives.
struct JSONValue {
    fileprivate let pointer: UnsafeMutablePointer<json_t>

    fileprivate init(_ pointer: UnsafeMutablePointer<json_t>) {
        self.pointer = pointer
    }

    enum Kind: String {
        case object, array, string, integer, real, bool, null
    }

    var kind: Kind {
        switch cjansson_typeof(pointer) {
        case JSON_OBJECT: .object
        case JSON_ARRAY: .array
        case JSON_STRING: .string
        case JSON_INTEGER: .integer
        case JSON_REAL: .real
        case JSON_TRUE, JSON_FALSE: .bool
        default: .null
        }
    }

    var string: String? {
        guard kind == .string, let text = json_string_value(pointer) else { return nil }
        return String(decoding: UnsafeRawBufferPointer(start: text, count: json_string_length(pointer)), as: UTF8.self)
    }

    var integer: Int? {
        kind == .integer ? Int(json_integer_value(pointer)) : nil
    }

    var real: Double { json_real_value(pointer) }

    var isTrue: Bool { cjansson_typeof(pointer) == JSON_TRUE }

    var array: [JSONValue]? {
        guard kind == .array else { return nil }
        return (0..<json_array_size(pointer)).compactMap { json_array_get(pointer, $0).map(JSONValue.init) }
    }

    /// The object's members, in the order jansson keeps them (not sorted).
    var members: [(key: String, value: JSONValue)]? {
        guard kind == .object else { return nil }
        var result: [(key: String, value: JSONValue)] = []
        result.reserveCapacity(json_object_size(pointer))
        var iterator = json_object_iter(pointer)
        while let current = iterator {
            if let key = json_object_iter_key(current), let value = json_object_iter_value(current) {
                let length = json_object_iter_key_len(current)
                result.append(
                    (
                        String(decoding: UnsafeRawBufferPointer(start: key, count: length), as: UTF8.self),
                        JSONValue(value)
                    ))
            }
            iterator = json_object_iter_next(pointer, current)
        }
        return result
    }

    subscript(key: String) -> JSONValue? {
        guard kind == .object else { return nil }
        return json_object_get(pointer, key).map(JSONValue.init)
    }

    /// The nesting depth (a scalar is 0), counting no further than one past `limit`.
    func depth(limit: Int) -> Int {
        guard limit >= 0 else { return 1 }
        let children: [JSONValue]
        switch kind {
        case .array: children = array ?? []
        case .object: children = members?.map(\.value) ?? []
        default: return 0
        }
        var deepest = 0
        for child in children {
            deepest = max(deepest, child.depth(limit: limit - 1))
            if deepest >= limit { break }
        }
        return deepest + 1
    }
}
