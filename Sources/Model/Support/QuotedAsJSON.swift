extension String {
    /// The string as a JSON string literal, quotes included: how error messages name an id, a field or a member,
    /// as a request writes it (Swift's `debugDescription` escapes as Swift does, `\u{1}`).
    var quotedAsJSON: String {
        var bytes: [UInt8] = []
        JSON.writeString(self, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension SectionRef: CustomStringConvertible {
    /// As a request writes it: `0` or `"id"`.
    public var description: String {
        switch self {
        case .index(let index): "\(index)"
        case .id(let id): id.quotedAsJSON
        }
    }
}

extension ItemRef: CustomStringConvertible {
    /// As a request writes it: `"id"` or `[section, index]`.
    public var description: String {
        switch self {
        case .id(let id): id.quotedAsJSON
        case .path(let section, let index): "[\(section), \(index)]"
        }
    }
}
