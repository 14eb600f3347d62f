import Dispatch

/// Evaluating the definition on every source item, in parts on several threads when the source is large; or on
/// the items a gate lets through (`GateIndex`), on the calling thread.
extension LiveView {
    /// The source items that pass the filter, in slot order: `count` members and their ids initialized in
    /// `members` and `ids`, and their order keys one after another in `flat` (`bounds[k]` is the k-th's).
    struct Passed {
        let members: UnsafeMutablePointer<Member>
        let ids: UnsafeMutablePointer<String>
        var count = 0
        var bounds: [Range<Int>] = []
        var flat: [UInt8] = []
    }

    /// A source with fewer item slots than this is filtered on the calling thread alone.
    static let partedFilterMinimum = 16_384
    /// How many parts a larger source is filtered in: Dispatch runs as many at once as there are cores.
    static let filterParts = 8

    /// What one part of the slots gave: how many passed, and their keys.
    private struct FilteredPart {
        var count = 0
        var bounds: [Range<Int>] = []
        var flat: [UInt8] = []
    }

    /// The parts' shared buffers, written by several threads at once, each in its own range.
    private struct SharedBuffers: @unchecked Sendable {
        let members: UnsafeMutablePointer<Member>
        let ids: UnsafeMutablePointer<String>
        let parts: UnsafeMutableBufferPointer<FilteredPart>
    }

    /// Evaluates the definition on every item of `store`, in parts on as many threads as Dispatch gives when the
    /// source is large: scanning each item's JSON for the fields the definition names is most of what creating
    /// or redefining a large view costs, and items are independent of each other. Each part writes its members
    /// and ids from the first slot of its range on; they are then moved down next to the part before.
    /// - Parameter candidates: when given, the item slots of the only items that can pass (`GateIndex`), which
    ///   are then evaluated alone, on the calling thread.
    /// - Returns: buffers whose initialized ids and members the caller deinitializes or moves out, then
    ///   deallocates.
    /// - Complexity: O(n) evaluations for n item slots, over the cores (for the candidates alone, on the calling
    ///   thread).
    static func filter(_ store: Store?, by rules: ViewRules, candidates: [Int]? = nil) -> Passed {
        if let store, let candidates { return filter(store, by: rules, onlySlots: candidates) }
        let slots = store?.itemSlotCount ?? 0
        var passed = Passed(members: .allocate(capacity: max(1, slots)), ids: .allocate(capacity: max(1, slots)))
        guard let store, slots > 0 else { return passed }
        let partCount = slots < partedFilterMinimum ? 1 : filterParts
        let shared = SharedBuffers(
            members: passed.members, ids: passed.ids, parts: .allocate(capacity: partCount))
        shared.parts.initialize(repeating: FilteredPart())
        defer {
            shared.parts.deinitialize()
            shared.parts.deallocate()
        }
        let range: @Sendable (Int) -> Range<Int> = { part in
            (slots * part / partCount)..<(slots * (part + 1) / partCount)
        }
        DispatchQueue.concurrentPerform(iterations: partCount) { part in
            let slotRange = range(part)
            var filtered = FilteredPart()
            filtered.bounds.reserveCapacity(slotRange.count)
            filtered.flat.reserveCapacity(slotRange.count * 32)
            // At most one item per slot: the part's writes stay within its own slot range.
            store.forEachItem(inSlots: slotRange) { id, data in
                guard let placement = rules.placement(id: id, data: data) else { return }
                filtered.bounds.append(filtered.flat.count..<(filtered.flat.count + placement.key.count))
                filtered.flat.append(contentsOf: placement.key)
                let at = slotRange.lowerBound + filtered.count
                (shared.members + at).initialize(to: Member(placement: placement, data: data))
                (shared.ids + at).initialize(to: id)
                filtered.count += 1
            }
            shared.parts[part] = filtered
        }
        passed.bounds.reserveCapacity(shared.parts.reduce(0) { $0 + $1.count })
        passed.flat.reserveCapacity(shared.parts.reduce(0) { $0 + $1.flat.count })
        for part in 0..<partCount {
            let start = range(part).lowerBound
            let filtered = shared.parts[part]
            if start != passed.count {
                (passed.members + passed.count).moveInitialize(from: passed.members + start, count: filtered.count)
                (passed.ids + passed.count).moveInitialize(from: passed.ids + start, count: filtered.count)
            }
            let offset = passed.flat.count
            passed.bounds.append(
                contentsOf: filtered.bounds.lazy.map { ($0.lowerBound + offset)..<($0.upperBound + offset) })
            passed.flat.append(contentsOf: filtered.flat)
            passed.count += filtered.count
        }
        return passed
    }

    /// `filter` on the items in `slots` alone.
    private static func filter(_ store: Store, by rules: ViewRules, onlySlots slots: [Int]) -> Passed {
        var passed = Passed(
            members: .allocate(capacity: max(1, slots.count)), ids: .allocate(capacity: max(1, slots.count)))
        store.forEachItem(inSlots: slots) { id, data in
            guard let placement = rules.placement(id: id, data: data) else { return }
            passed.bounds.append(passed.flat.count..<(passed.flat.count + placement.key.count))
            passed.flat.append(contentsOf: placement.key)
            (passed.members + passed.count).initialize(to: Member(placement: placement, data: data))
            (passed.ids + passed.count).initialize(to: id)
            passed.count += 1
        }
        return passed
    }
}
