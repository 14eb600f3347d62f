import Model
import Synchronization

/// A collection's or view's snapshot kept encoded between reads (`FeedSubject.snapshotJSON`), found by its
/// version. A view's snapshot also shows its definition, which a redefinition can change while the version stays:
/// `invalidate` then drops it, and a snapshot written before that (by a read that raced the redefinition) is not
/// kept when it arrives after it.
final class SnapshotCache: Sendable {
    private struct State {
        var snapshot: EncodedSnapshot?
        /// The `304` of the last snapshot written too large to be kept (`EncodedSnapshot.cachedLimit`), and its
        /// version: a revalidation of it is answered without encoding it again just to learn its length.
        var largeNotModified: (version: Version, response: Response)?
        /// The body of the last snapshot too large to be kept, while an answer still holds it.
        var largeBody: WeakShare<ResponseBytes>?
        /// The body of the feed's last reset (`{"reset": true, …, "snapshot"}`) too large to be kept, while an
        /// answer still holds it: every client of a large collection resets at once after a `410` or an epoch's
        /// renewal, and each reset was encoded and held apart (30 resets of an 86 MB snapshot held 1 GB, and
        /// most were refused `503`). Its `next` URL names the poll's timeout, so that is part of its key.
        var largeReset: WeakShare<ResponseBytes>?
        /// The last `event: reset` of the event streams opened without a version, while a stream still holds it:
        /// 20 streams of a 16 MB snapshot that read nothing held 20 copies (467 MB).
        var streamReset: WeakShare<StreamReset>?
        /// Raised by every `invalidate`: a read keeps what it wrote only if none came between.
        var generation: UInt64 = 0
    }

    /// A weak hold of what the answers being sent share: it goes with the last of them.
    private struct WeakShare<Shared: AnyObject> {
        let version: Version
        /// The poll timeout a reset's `next` URL names; 0 for what does not depend on one.
        let timeout: Int
        weak var shared: Shared?

        static func find(_ share: Self?, at version: Version, timeout: Int = 0) -> Shared? {
            guard let share, share.version == version, share.timeout == timeout else { return nil }
            return share.shared
        }
    }

    private let state = Mutex(State())

    /// The snapshot kept, whatever its version.
    var current: EncodedSnapshot? { state.withLock { $0.snapshot } }

    /// To be read before the snapshot is written, and given to `keep`.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// The snapshot of `version`, if it is the one kept.
    func snapshot(at version: Version) -> EncodedSnapshot? {
        guard let kept = current, kept.version == version else { return nil }
        return kept
    }

    /// The `304` for a read of `version` whose `If-None-Match` names it, if its snapshot was written since the
    /// last change.
    func notModified(at version: Version) -> Response? {
        state.withLock { state in
            if let kept = state.snapshot, kept.version == version { return kept.notModified }
            if let large = state.largeNotModified, large.version == version { return large.response }
            return nil
        }
    }

    /// Keeps `snapshot` (only its `304` when it is larger than `EncodedSnapshot.cachedLimit`), unless the cache was
    /// invalidated since `generation` was read.
    func keep(_ snapshot: EncodedSnapshot, writtenAt generation: UInt64) {
        state.withLock { state in
            guard state.generation == generation else { return }
            if snapshot.json.count <= EncodedSnapshot.cachedLimit {
                state.snapshot = snapshot
            } else {
                state.largeNotModified = (snapshot.version, snapshot.notModified)
            }
        }
    }

    /// The body of `version`'s snapshot, too large to be kept, while an answer still being sent holds it: a read
    /// sends the same bytes, neither encoded nor copied again (`ResponseBytes`).
    func sharedLargeBody(at version: Version) -> ResponseBytes? {
        state.withLock { WeakShare.find($0.largeBody, at: version) }
    }

    /// Holds `bytes`, the body of `version`'s snapshot, weakly for the reads that come while it is being sent,
    /// unless the cache was invalidated since `generation` was read.
    func shareLargeBody(_ bytes: ResponseBytes, at version: Version, writtenAt generation: UInt64) {
        state.withLock { state in
            guard state.generation == generation else { return }
            state.largeBody = WeakShare(version: version, timeout: 0, shared: bytes)
        }
    }

    /// The body of the feed's reset to `version` for polls of `timeout`, too large to be kept, while an answer
    /// still being sent holds it.
    func sharedLargeReset(at version: Version, timeout: Int) -> ResponseBytes? {
        state.withLock { WeakShare.find($0.largeReset, at: version, timeout: timeout) }
    }

    /// Holds `bytes`, the body of the reset to `version` for polls of `timeout`, weakly for the resets that come
    /// while it is being sent, unless the cache was invalidated since `generation` was read.
    func shareLargeReset(_ bytes: ResponseBytes, at version: Version, timeout: Int, writtenAt generation: UInt64) {
        state.withLock { state in
            guard state.generation == generation else { return }
            state.largeReset = WeakShare(version: version, timeout: timeout, shared: bytes)
        }
    }

    /// The `event: reset` to `version` of the streams opened without a version, while a stream still holds it.
    func sharedStreamReset(at version: Version) -> StreamReset? {
        state.withLock { WeakShare.find($0.streamReset, at: version) }
    }

    /// Holds `reset` weakly for the streams opened while one still holds it, unless the cache was invalidated since
    /// `generation` was read.
    func shareStreamReset(_ reset: StreamReset, writtenAt generation: UInt64) {
        state.withLock { state in
            guard state.generation == generation else { return }
            state.streamReset = WeakShare(version: reset.version, timeout: 0, shared: reset)
        }
    }

    /// Drops the snapshot kept, and any written before now that is yet to be kept; call it after the change.
    func invalidate() {
        state.withLock { state in
            state.snapshot = nil
            state.largeNotModified = nil
            state.largeBody = nil
            state.largeReset = nil
            state.streamReset = nil
            state.generation &+= 1
        }
    }
}
