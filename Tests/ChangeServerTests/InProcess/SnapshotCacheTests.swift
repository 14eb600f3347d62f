import Model
import Testing

@testable import ChangeServer

/// `SnapshotCache`: a snapshot written before an invalidation is not kept after it (a view's redefinition keeps its
/// version, so the version alone cannot tell the old definition's snapshot from the new one's).
@Suite struct InProcessSnapshotCacheTests {
    @Test func aSnapshotWrittenBeforeAnInvalidationIsNotKept() {
        let cache = SnapshotCache()
        let version = Version(epoch: "e", seq: 3)
        let old = EncodedSnapshot(version: version, json: Array(#"{"old":true}"#.utf8))
        let new = EncodedSnapshot(version: version, json: Array(#"{"new":true}"#.utf8))

        let before = cache.generation
        cache.keep(old, writtenAt: before)
        #expect(cache.snapshot(at: version)?.json == old.json)
        #expect(cache.snapshot(at: Version(epoch: "e", seq: 4)) == nil)

        let raced = cache.generation
        cache.invalidate()
        #expect(cache.current == nil)
        cache.keep(old, writtenAt: raced)
        #expect(cache.current == nil, "written before the invalidation, arrived after it")

        cache.keep(new, writtenAt: cache.generation)
        #expect(cache.snapshot(at: version)?.json == new.json)
    }
}
