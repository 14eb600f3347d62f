import Model
import Testing

@testable import ChangeServer

/// `EntityTags`: the `ETag` a version is sent as, and the tags a header names.
@Suite struct InProcessEntityTagTests {
    @Test(
        arguments: [
            ("a", 0), ("abc_DEF-123", 1), ("e", 9), ("e", 10), ("q9Zk2mW7xP1c", 4_294_967_296),
            (String(repeating: "z", count: 32), UInt64.max),
        ] as [(String, UInt64)])
    func aVersionIsQuotedAsItsText(epoch: String, seq: UInt64) {
        let version = Version(epoch: epoch, seq: seq)
        #expect(EntityTags.quoted(version) == "\"\(epoch).\(seq)\"")
        #expect(EntityTags(EntityTags.quoted(version)).matches(version, weakly: false))
    }

    /// The forms the README documents: a version without its quotes is read as the quoted one, a weak tag never
    /// matches strongly, `*` matches an existing collection only, and a list matches by any of its tags.
    @Test func theDocumentedFormsOfAHeader() {
        let version = Version(epoch: "E", seq: 3)
        #expect(EntityTags("E.3").matches(version, weakly: false))
        #expect(EntityTags(#" "E.2" , "E.3" "#).matches(version, weakly: false))
        #expect(!EntityTags(#"W/"E.3""#).matches(version, weakly: false))
        #expect(EntityTags(#"W/"E.3""#).matches(version, weakly: true))
        #expect(EntityTags("*").matches(version, weakly: false) && !EntityTags("*").matches(nil, weakly: false))
        #expect(
            !EntityTags(#""E.30""#).matches(version, weakly: false)
                && !EntityTags(#""E.03""#).matches(version, weakly: false))
    }
}
