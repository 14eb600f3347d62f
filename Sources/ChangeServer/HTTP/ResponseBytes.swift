import CHTTPD
import Glibc

/// The body of a large answer, in memory of its own that libmicrohttpd sends from without a copy, counted against
/// `--max-response-memory` (`MemoryBudget`) until every connection it went to is done with it.
///
/// libmicrohttpd keeps an answer until its client has taken all of it, or until the connection's idle timeout
/// (120 s) when the client reads nothing. Without a bound, a request of 70 bytes pinned a copy of a 5 MB snapshot
/// for that long: 300 connections that read nothing took 1.5 GB. Each libmicrohttpd response made from these bytes
/// (`makeResponse`) holds them, so that answers of the same bytes on many connections share one copy
/// (`SnapshotCache.sharedLargeBody`), and the budget is given back when the last of them is freed.
final class ResponseBytes: Sendable {
    /// Bodies larger than this are counted; smaller ones are copied by libmicrohttpd as before (a snapshot up to
    /// this size is kept encoded and shared anyway, `EncodedSnapshot.cachedLimit`).
    static let countedSize = 1 << 20

    /// nonisolated(unsafe): written once here, only read after, freed in `deinit`.
    nonisolated(unsafe) private let memory: UnsafeMutableRawBufferPointer
    let count: Int
    private let budget: MemoryBudget

    /// A copy of `body`, or nil when the budget has no room for it (a body larger than the whole budget goes when
    /// nothing else is held).
    init?(copying body: [UInt8], budget: MemoryBudget) {
        guard budget.reserve(body.count, orAlone: true) else { return nil }
        self.budget = budget
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, body.count), alignment: 1)
        body.withUnsafeBytes { memory.copyMemory(from: $0) }
        self.memory = memory
        count = body.count
    }

    /// A libmicrohttpd response with these bytes as its body, holding them until libmicrohttpd frees it; nil when
    /// libmicrohttpd could not make one.
    func makeResponse() -> OpaquePointer? {
        let held = Unmanaged.passRetained(self).toOpaque()
        guard
            let response = MHD_create_response_from_buffer_with_free_callback_cls(
                count, memory.baseAddress, Self.letGo, held)
        else {
            Unmanaged<ResponseBytes>.fromOpaque(held).release()
            return nil
        }
        return response
    }

    /// The bytes, for an answer written outside libmicrohttpd (`SharedResponse.wire`).
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: memory.baseAddress, count: count) }

    private static let letGo: MHD_ContentReaderFreeCallback = { held in
        guard let held else { return }
        Unmanaged<ResponseBytes>.fromOpaque(held).release()
    }

    deinit {
        memory.deallocate()
        budget.release(count)
    }
}
