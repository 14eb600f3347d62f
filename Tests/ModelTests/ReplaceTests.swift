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
    }
}
