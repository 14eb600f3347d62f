/// The items of one source by the canonical text of the fields its views' gates test (`ViewGate`), read in one
/// pass over the source: a view restored with it (`LiveView(restoring:definition:source:gates:)`) evaluates its
/// definition only on the items that can pass its gate, not on every item of the source.
///
/// A start from a snapshot rebuilds every view's index from its source. Each view reading the whole source made
/// the start grow with views × items: 5,000 views of one user's conversations each, over 15,000 conversations,
/// took about 10 s before the server answered, and 10,000 over 30,000 took 40 s (0.2 and 0.3 s with the index:
/// `scripts/bench-view-restart.sh`).
public struct GateIndex: Sendable {
    /// The item slots of each field's texts, ascending.
    private let slots: [JSONPointer: [[UInt8]: [Int]]]

    /// Reads the fields `pointers` name in every item of `source`.
    /// - Complexity: O(n f) field reads for n source items and f pointers.
    public init(_ source: VersionedCollection, pointers: Set<JSONPointer>) {
        var slots: [JSONPointer: [[UInt8]: [Int]]] = [:]
        for pointer in pointers {
            var byText: [[UInt8]: [Int]] = [:]
            source.store.forEachItemSlot { slot, data in byText[pointer.valueText(in: data), default: []].append(slot) }
            slots[pointer] = byText
        }
        self.slots = slots
    }

    /// The item slots whose field holds one of the gate's texts, ascending; nil when the index was not built for
    /// the gate's field.
    /// - Complexity: O(m log m) for the m slots found.
    func slots(passing gate: ViewGate) -> [Int]? {
        guard let byText = slots[gate.pointer] else { return nil }
        var found: [Int] = []
        for text in gate.texts { found += byText[text] ?? [] }
        // Each slot holds one text: the lists do not overlap.
        return gate.texts.count > 1 ? found.sorted() : found
    }
}
