import Dispatch
import Glibc

/// A POSIX thread running `body`, to be joined: the server's loops and the journal's syncer are stopped by
/// making their bodies return, then joined, so that a stop knows they are done instead of polling for it.
final class JoinableThread: Sendable {
    // The handle is written once, by `init`, before any other thread can see the object.
    private nonisolated(unsafe) var thread = pthread_t()
    /// Signalled when the body has returned.
    private let finished = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () -> Void) {
        let context = Unmanaged.passRetained(
            ThreadBody { [finished] in
                body()
                finished.signal()
            }
        ).toOpaque()
        pthread_create(&thread, nil, runThreadBody, context)
    }

    /// Waits until the body has returned. Call it, or `join(within:)`, once.
    func join() {
        pthread_join(thread, nil)
    }

    /// Waits at most `milliseconds` for the body to return, then joins it; false (the thread left to run on,
    /// detached) when it has not: for a thread blocked where nothing can wake it, such as a call into a database
    /// that does not answer, which must not hold a stop up for good.
    func join(within milliseconds: Int) -> Bool {
        guard finished.wait(timeout: .now() + .milliseconds(milliseconds)) == .success else {
            pthread_detach(thread)
            return false
        }
        pthread_join(thread, nil)
        return true
    }
}

/// Starts a detached POSIX thread running `body`: for threads nobody waits for (the signal thread, which ends
/// with the process, short background jobs that report by themselves, and `BulkThreads`). False when the thread
/// could not be started (the process's thread limit): `body` never runs then. The thread starts with its
/// creator's nice value, so a thread started from a bulk thread runs at bulk priority.
@discardableResult
func startThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    var thread = pthread_t()
    let body = Unmanaged.passRetained(ThreadBody(body))
    guard pthread_create(&thread, nil, runThreadBody, body.toOpaque()) == 0 else {
        body.release()
        return false
    }
    pthread_detach(thread)
    return true
}

private final class ThreadBody {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

private func runThreadBody(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let context else { return nil }
    Unmanaged<ThreadBody>.fromOpaque(context).takeRetainedValue().body()
    return nil
}
