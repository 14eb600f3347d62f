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

    /// A snapshot too large to be kept leaves its `304`, which says its length: a revalidation of it (a cache's,
    /// before every use of a `no-cache` snapshot) encoded all of it again only to learn that length.
    @Test func aLargeSnapshotLeavesItsNotModifiedAnswer() {
        let cache = SnapshotCache()
        let version = Version(epoch: "e", seq: 3)
        let large = EncodedSnapshot(
            version: version, json: [UInt8](repeating: 0x20, count: EncodedSnapshot.cachedLimit + 1))
        cache.keep(large, writtenAt: cache.generation)
        #expect(cache.snapshot(at: version) == nil, "its bytes are not kept")
        let notModified = cache.notModified(at: version)
        #expect(notModified?.status == .notModified && notModified?.contentLength == EncodedSnapshot.cachedLimit + 1)
        #expect(cache.notModified(at: Version(epoch: "e", seq: 4)) == nil)
        cache.invalidate()
        #expect(cache.notModified(at: version) == nil)
        let small = EncodedSnapshot(version: version, json: Array("{}".utf8))
        cache.keep(small, writtenAt: cache.generation)
        #expect(cache.notModified(at: version)?.contentLength == 2)
    }
}
