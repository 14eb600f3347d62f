/// A test that every item a view shows passes on one field: the field's canonical text (`null` when it is
/// missing, as `eq` reads it) is one of `texts`. A filter implies one when it is an `eq` or an `in`, alone or
/// among the tests of an `all`: a view of one user's conversations (`{"field": "/owner", "eq": "u42"}`) shows
/// only items whose owner is `"u42"`.
///
/// It tells which views a change of their source can touch (`ViewDispatch`): an item that fails the gate both
/// before and after the change was not in the view and is not now, whatever else the definition says.
public struct ViewGate: Sendable, Equatable {
    /// The field tested.
    public let pointer: JSONPointer
    /// The canonical texts the field may hold in an item the view shows.
    public let texts: Set<[UInt8]>

    /// The gate `filter` implies; nil when it implies none (`any`, `not`, and the other tests need not hold for
    /// a fixed set of values). Of an `all`'s gates, the one with the fewest values.
    public init?(_ filter: ViewFilter) {
        switch filter {
        case .leaf(let pointer, .eq(let value)):
            self.init(pointer: pointer, texts: [value.canonicalText])
        case .leaf(let pointer, .in(let values)):
            self.init(pointer: pointer, texts: Set(values.map(\.canonicalText)))
        case .all(let filters):
            guard let narrowest = filters.compactMap(ViewGate.init).min(by: { $0.texts.count < $1.texts.count })
            else { return nil }
            self = narrowest
        case .any, .not, .leaf:
            return nil
        }
    }

    private init(pointer: JSONPointer, texts: Set<[UInt8]>) {
        self.pointer = pointer
        self.texts = texts
    }
}

extension JSONPointer {
    /// The canonical text of the value the pointer addresses in `data`, `null` when it is missing: what a
    /// filter's `eq` compares, byte for byte.
    /// - Complexity: O(n) for the n bytes of the data before the value, at most.
    func valueText(in data: JSONData) -> [UInt8] {
        data.bytes.withUnsafeBufferPointer { bytes in
            guard let range = locate(in: bytes) else { return JSONPointer.null }
            return Array(bytes[range])
        }
    }

    private static let null = Array("null".utf8)
}

extension ViewDefinition {
    /// The gate the filter implies, if any (`ViewGate`).
    public var gate: ViewGate? { filter.flatMap(ViewGate.init) }
}
