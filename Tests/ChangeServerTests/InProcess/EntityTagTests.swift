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

    /// The forms the README documents, through the path a request's headers take (`Conditions.from`, then the
    /// check when its record is applied): a version without its quotes is read as the quoted one, a weak tag never
    /// matches (the request is refused at once: nothing is left of its `If-Match`), `*` matches an existing
    /// collection only, and a list matches by any of its tags.
    @Test func theDocumentedFormsOfIfMatch() {
        let version = Version(epoch: "E", seq: 3)
        func taken(_ ifMatch: String, _ current: Version? = Version(epoch: "E", seq: 3)) -> Bool {
            guard let conditions = JournalRecord.Conditions.from(ifMatch: ifMatch, ifNoneMatch: nil) else {
                return false
            }
            do throws(Rejection) {
                try conditions.check(current)
                return true
            } catch {
                return false
            }
        }
        #expect(taken("E.3") && taken(#""E.3""#) && taken(#" "E.2" , "E.3" "#))
        #expect(JournalRecord.Conditions.from(ifMatch: #"W/"E.3""#, ifNoneMatch: nil) == nil)
        #expect(taken(#"W/"E.3", "E.3""#))
        #expect(taken("*") && !taken("*", nil))
        #expect(!taken(#""E.30""#) && !taken(#""E.03""#) && !taken(#""E.3""#, version.next))
    }
}
