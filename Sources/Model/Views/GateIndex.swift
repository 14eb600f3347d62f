/// The items of one source by the canonical text of the fields its views' gates test (`ViewGate`), each field
/// read once per item for every view that tests it: a view restored with it
/// (`LiveView(restoring:definition:source:gates:)`) evaluates its definition only on the items that can pass its
/// gate, not on every item of the source.
///
/// A start from a snapshot rebuilds every view's index from its source. Each view reading the whole source made
/// the start grow with views × items: 5,000 views of one user's conversations each, over 15,000 conversations,
/// took about 10 s before the server answered, and 10,000 over 30,000 took 40 s (0.2 and 0.3 s with the index:
/// `scripts/bench-view-restart.sh`). Only the texts the gates ask for are kept: a field whose every item holds
/// another value (a time, an id) costs a lookup per item, not an entry.
public struct GateIndex: Sendable {
    /// For each field, the item slots of each text a gate asks for (ascending; empty when no item holds it).
    private let slots: [JSONPointer: [[UInt8]: [Int]]]

    /// Reads, in every item of `source`, the fields `gates` test.
    /// - Complexity: O(n f) field reads for n source items and f fields.
    public init(_ source: VersionedCollection, gates: [ViewGate]) {
        // Every field a gate tests, also for a gate of no text (`in []`), which no item passes.
        var wanted: [JSONPointer: Set<[UInt8]>] = [:]
        for gate in gates { wanted[gate.pointer, default: []].formUnion(gate.texts) }
        var slots: [JSONPointer: [[UInt8]: [Int]]] = [:]
        for (pointer, texts) in wanted {
            // A local table, changed in place: kept in an array of fields, each append copied it.
            var byText = Dictionary(uniqueKeysWithValues: texts.map { ($0, [Int]()) })
            source.store.forEachItemSlot { slot, data in byText[pointer.valueText(in: data)]?.append(slot) }
            slots[pointer] = byText
        }
        self.slots = slots
    }

    /// The item slots whose field holds one of the gate's texts, ascending; nil when the index was not built for
    /// all of them (another field, or a text no gate it was built from asks for).
    /// - Complexity: O(t + m log m) for the gate's t texts and the m slots found.
    func slots(passing gate: ViewGate) -> [Int]? {
        guard let byText = slots[gate.pointer] else { return nil }
        var found: [Int] = []
        for text in gate.texts {
            guard let slots = byText[text] else { return nil }
            found += slots
        }
        // Each slot holds one text: the lists do not overlap.
        return gate.texts.count > 1 ? found.sorted() : found
    }
}
