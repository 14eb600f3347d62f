import Dispatch

/// Runs `first` on `a` and `second` on `b` at the same time, on two threads when Dispatch has a second one free
/// (on the calling thread one after the other when it has not, or when `worthIt` is false: for small work the
/// hop to another thread costs more than it saves), and returns when both are done.
///
/// For the large steps of the model (a view of a million items, the replacement of a whole collection) whose
/// halves touch disjoint values: the caller passes each half only what it may write, and promises that what
/// both closures capture is only read by both or written by one.
func concurrently<A, B>(
    _ a: inout A, _ b: inout B, if worthIt: Bool, _ first: (inout A) -> Void, _ second: (inout B) -> Void
) {
    guard worthIt else {
        first(&a)
        second(&b)
        return
    }
    withUnsafeMutablePointer(to: &a) { a in
        withUnsafeMutablePointer(to: &b) { b in
            withoutActuallyEscaping(first) { first in
                withoutActuallyEscaping(second) { second in
                    let halves = Halves { half in half == 0 ? first(&a.pointee) : second(&b.pointee) }
                    DispatchQueue.concurrentPerform(iterations: 2) { halves.run($0) }
                }
            }
        }
    }
}

/// The two halves of `concurrently` as one closure for Dispatch, which wants it `Sendable`: the halves write
/// only their own argument, which `concurrently` holds exclusively until both return (hence unchecked).
private struct Halves: @unchecked Sendable {
    let run: (Int) -> Void
}
