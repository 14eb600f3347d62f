import Testing

@testable import Model

/// `replace` checks the new content's ids wherever the repeat hides: among untouched, matched or new items.
@Suite struct ReplaceTests {
    static let invalid: [([Section], ModelError.Code)] = [
        (sections("A: a b c", "B: d", "C: e", "A: x"), .duplicateID),
        (sections("A: a b c", "B: d a", "C: e"), .duplicateID),
        (sections("A: a b c", "B: d", "C: e d"), .duplicateID),
        (sections("A: a b c", "B: x", "C: x"), .duplicateID),
        (sections("A: a x c", "B: d", "C: e a"), .duplicateID),
        (sections("A: a b c", "B: d b", "C: e"), .duplicateID),
        (sections("A: a b c", "B: d", "C: e", "D: b"), .duplicateID),
        (sections("A: a b c a"), .duplicateID),
        (sections("A: a b c", "B: d", "C: e") + [Section(id: "")], .invalidID),
        ([Section(id: "A", items: [Item(id: "")])], .invalidID),
        ([Section(id: "A", items: [Item(id: String(repeating: "é", count: 129))])], .invalidID),
    ]

    @Test(arguments: invalid.indices)
    func repeatedOrInvalidIDsAreRejected(_ index: Int) throws {
        let (content, code) = Self.invalid[index]
        var collection = try VersionedCollection(epoch: "e", sections: sections("A: a b c", "B: d", "C: e"))
        #expect(throws: ModelError.self) { try collection.replace(with: content) }
        do {
            _ = try collection.replace(with: content)
        } catch {
            #expect(error.code == code)
        }
        #expect(collection.snapshot() == sections("A: a b c", "B: d", "C: e"))
        #expect(collection.version.seq == 1)
    }

    @Test func creationRejectsRepeatsToo() {
        #expect(throws: ModelError.self) { try VersionedCollection(epoch: "e", sections: sections("A: a", "B: a")) }
        #expect(throws: ModelError.self) { try VersionedCollection(epoch: "e", sections: sections("A: a", "A: b")) }
        #expect(throws: ModelError.self) { try VersionedCollection(epoch: "e", sections: [Section(id: "")]) }
        let long = Item(id: String(repeating: "x", count: maximumIDByteCount + 1))
        #expect(throws: ModelError.self) {
            try VersionedCollection(epoch: "e", sections: [Section(id: "A", items: [long])])
        }
    }

    /// Long sections edited in blocks (runs deleted, moved, inserted, reversed; items moved across sections), so
    /// that the full diff's order following loses and regains its place.
    @Test func blockEditsOfLongSectionsApply() throws {
        for seed in UInt64(0)..<150 {
            var random = RandomContent(seed: seed)
            let old = (0..<random.int(1...3)).map { Section(id: "s\($0)", items: random.items(random.int(0...400))) }
            var new = old
            for _ in 0..<random.int(1...8) {
                let s = random.int(0...new.count - 1)
                let count = new[s].items.count
                guard count > 0 else { continue }
                let start = random.int(0...count - 1)
                let range = start..<min(count, start + random.int(1...30))
                switch random.int(0...5) {
                case 0: new[s].items.removeSubrange(range)
                case 1:
                    let block = Array(new[s].items[range])
                    new[s].items.removeSubrange(range)
                    let t = random.int(0...new.count - 1)
                    new[t].items.insert(contentsOf: block, at: random.int(0...new[t].items.count))
                case 2: new[s].items.insert(contentsOf: random.items(random.int(1...20)), at: start)
                case 3: new[s].items[range].reverse()
                case 4: new[s].items[range.lowerBound].data = random.data()
                default: new[s].items.swapAt(range.lowerBound, random.int(0...count - 1))
                }
            }
            var collection = try VersionedCollection(epoch: "e", sections: old)
            verify(try collection.replace(with: new), from: old, to: new, "block edits seed \(seed)")
        }
    }
}

/// Content of `VersionedCollection.concurrentReplaceMinimum` items or more is diffed while its store is built on
/// another thread: the result is the same, and a rejected content still changes nothing.
@Suite struct LargeReplaceTests {
    static func content(_ count: Int, shift: Int, repeating: Bool = false) -> [Section] {
        let ids = (0..<count).map { "i\(($0 * 7 + shift) % count)" }
        let items = ids.enumerated().map { Item(id: repeating && $0.offset == count - 1 ? ids[0] : $0.element) }
        return [
            Section(id: "a", items: Array(items[..<(count / 3)])),
            Section(id: "b", items: Array(items[(count / 3)...])),
        ]
    }

    @Test func aLargeReplacementIsDiffedWhileItsStoreIsBuilt() throws {
        let count = VersionedCollection.concurrentReplaceMinimum + 1_000
        let old = Self.content(count, shift: 0)
        var collection = try VersionedCollection(epoch: "e", sections: old)
        let new = Self.content(count, shift: 3)
        let changeset = try collection.replace(with: new)
        #expect(collection.snapshot() == new)
        #expect(collection.version.seq == 2)
        #expect(changeset.items.moved.count > 0)
        verify(changeset, from: old, to: new, "a large replacement")
        #expect(collection.changes(since: Version(epoch: "e", seq: 1)) == changeset)

        let repeated = Self.content(count, shift: 5, repeating: true)
        #expect(throws: ModelError.self) { try collection.replace(with: repeated) }
        #expect(collection.snapshot() == new)
        #expect(collection.version.seq == 2)
        #expect(try collection.replace(with: new).isEmpty)
        #expect(collection.version.seq == 2)
    }
}
