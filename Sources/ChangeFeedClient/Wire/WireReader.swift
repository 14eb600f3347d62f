import Model

/// Typed reads of a parsed answer: each names the field it wanted, so a refusal says what was wrong and where.
struct WireReader {
    let members: [ExactString: JSON]
    let path: String

    init(_ value: JSON, path: String) throws(FeedError) {
        guard case .object(let members) = value else { throw FeedError.invalidAnswer("\(path) is not an object") }
        self.members = members
        self.path = path
    }

    func has(_ key: String) -> Bool { members[ExactString(key)] != nil }

    func value(_ key: String) throws(FeedError) -> JSON {
        guard let value = members[ExactString(key)] else { throw FeedError.invalidAnswer("\(path).\(key) is missing") }
        return value
    }

    func object(_ key: String) throws(FeedError) -> WireReader {
        try WireReader(try value(key), path: "\(path).\(key)")
    }

    func string(_ key: String) throws(FeedError) -> String {
        guard case .string(let text) = try value(key) else {
            throw FeedError.invalidAnswer("\(path).\(key) is not a string")
        }
        return text
    }

    func optionalString(_ key: String) throws(FeedError) -> String? {
        guard has(key) else { return nil }
        return try string(key)
    }

    func version(_ key: String) throws(FeedError) -> Version {
        let text = try string(key)
        guard let version = Version(text) else { throw FeedError.invalidAnswer("\(path).\(key) is not a version") }
        return version
    }

    func array(_ key: String) throws(FeedError) -> [JSON] {
        guard case .array(let elements) = try value(key) else {
            throw FeedError.invalidAnswer("\(path).\(key) is not an array")
        }
        return elements
    }

    func index(_ key: String) throws(FeedError) -> Int {
        try WireReader.index(try value(key), path: "\(path).\(key)")
    }

    /// An `[section, item]` pair of indices.
    func itemPath(_ key: String) throws(FeedError) -> ItemPath {
        guard case .array(let pair) = try value(key), pair.count == 2 else {
            throw FeedError.invalidAnswer("\(path).\(key) is not an index path")
        }
        return ItemPath(
            section: try WireReader.index(pair[0], path: "\(path).\(key)[0]"),
            item: try WireReader.index(pair[1], path: "\(path).\(key)[1]"))
    }

    /// The canonical text of a `data` member; a missing one is `null`, as in requests.
    func data(_ key: String = "data") -> JSONData {
        members[ExactString(key)].map(\.data) ?? .null
    }

    /// An id: a string of 1 to 256 UTF-8 bytes without NUL (the contract's limit).
    func id(_ key: String = "id") throws(FeedError) -> String {
        let id = try string(key)
        let count = id.utf8.count
        guard count > 0, count <= 256, !id.utf8.contains(0) else {
            throw FeedError.invalidAnswer("\(path).\(key) is not a valid id")
        }
        return id
    }

    /// A non-negative integer written without fraction or exponent.
    static func index(_ value: JSON, path: String) throws(FeedError) -> Int {
        guard case .number(let text) = value, let index = Int(text), index >= 0 else {
            throw FeedError.invalidAnswer("\(path) is not a non-negative integer")
        }
        return index
    }
}
