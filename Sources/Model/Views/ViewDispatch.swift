/// The views of one source, arranged so that a change of the source is handed only to the views it can touch.
///
/// Without it, every write to a source was evaluated by every view of it: 5,000 views of one user's
/// conversations each, over one source, made every write parse the item 5,000 times (about 10 ms), and a view a
/// write cannot touch changes nothing. A view whose filter implies a gate (`ViewGate`: a field that must hold one
/// of a few values) is handed a change only when a touched item's field held one of them before the change or
/// holds one after; the gates' fields are read once per item, and the views looked up by the text found.
/// Views without a gate are handed every change.
public struct ViewDispatch<Target: Sendable>: Sendable {
    /// The gates on one field: the views (positions in `targets`) by the values they let through.
    private struct Field: Sendable {
        let pointer: JSONPointer
        var views: [[UInt8]: [Int]]
    }

    /// Every view, in the order given.
    public let targets: [Target]
    /// The positions of the views without a gate, ascending.
    private let ungated: [Int]
    private let fields: [Field]

    /// - Parameter views: the views of one source, each with the gate of its definition, if any.
    /// - Complexity: O(v + t) for v views and t gate values.
    public init(_ views: [(target: Target, gate: ViewGate?)]) {
        targets = views.map(\.target)
        var ungated: [Int] = []
        var fields: [Field] = []
        var fieldOf: [JSONPointer: Int] = [:]
        for (position, view) in views.enumerated() {
            guard let gate = view.gate else {
                ungated.append(position)
                continue
            }
            let field =
                fieldOf[gate.pointer]
                ?? {
                    fields.append(Field(pointer: gate.pointer, views: [:]))
                    fieldOf[gate.pointer] = fields.count - 1
                    return fields.count - 1
                }()
            for text in gate.texts { fields[field].views[text, default: []].append(position) }
        }
        self.ungated = ungated
        self.fields = fields
    }

    /// The views `delta` can touch, in the order given: all of them when it does not say what touched items
    /// held before (a source created, deleted or replaced).
    /// - Complexity: O(k f) field reads for k touched items and f gated fields, plus the views found.
    public func targets(touchedBy delta: SourceDelta) -> [Target] {
        guard !fields.isEmpty, let previous = delta.previous else { return targets }
        var chosen = ungated
        for field in fields {
            for (item, before) in zip(delta.items, previous) {
                if let before, let views = field.views[field.pointer.valueText(in: before)] {
                    chosen.append(contentsOf: views)
                }
                if let now = item.data, let views = field.views[field.pointer.valueText(in: now)] {
                    chosen.append(contentsOf: views)
                }
            }
        }
        guard chosen.count > ungated.count else { return ungated.map { targets[$0] } }
        chosen.sort()
        var found: [Target] = []
        var last = -1
        for position in chosen where position != last {
            found.append(targets[position])
            last = position
        }
        return found
    }
}
