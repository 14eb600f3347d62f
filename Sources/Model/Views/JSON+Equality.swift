/// Equality of JSON values as the contract has it, which is equality of their canonical text: strings compare by
/// their bytes (`ExactString`), never by Unicode equivalence, and numbers by their text (`1` is not `1.0`).
extension JSON {
    /// - Complexity: O(n) for n bytes.
    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)), (.string(let a), .string(let b)): a.hasSameBytes(as: b)
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a == b
        default: false
        }
    }

    /// - Complexity: O(n) for n bytes.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let value): hasher.combine(value ? 2 : 1)
        case .number(let text):
            hasher.combine(3)
            hasher.combine(ExactString(text))
        case .string(let text):
            hasher.combine(4)
            hasher.combine(ExactString(text))
        case .array(let elements):
            hasher.combine(5)
            hasher.combine(elements)
        case .object(let members):
            hasher.combine(6)
            hasher.combine(members)
        }
    }
}
