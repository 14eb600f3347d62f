/// The `data` of a section or an item, as canonical JSON text (object keys sorted, no insignificant
/// whitespace). Model never parses it: two values are equal exactly when their bytes are equal, which is
/// the contract's definition of data equality once the server has canonicalised them.
public struct JSONData: Hashable, Sendable {
    /// The canonical JSON text, UTF-8.
    public let bytes: [UInt8]

    /// Wraps bytes that are already canonical JSON; Model does not check them (ChangeFeedClient's writes refuse
    /// data that is not one JSON value, `WriteError.invalidRequest`, and the server makes data canonical).
    public init(canonical bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Wraps a string that is already canonical JSON.
    public init(canonical text: String) {
        self.bytes = Array(text.utf8)
    }

    /// JSON `null`, the default `data` of sections and items.
    public static let null = JSONData(canonical: "null")
}

extension JSONData: CustomStringConvertible {
    /// The canonical text.
    public var description: String { String(decoding: bytes, as: UTF8.self) }
}
