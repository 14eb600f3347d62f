import Foundation

/// Medians of wall-clock time.
enum Timing {
    /// The median of `repetitions` runs of `body`, in milliseconds.
    static func median(_ repetitions: Int, _ body: () throws -> Void) rethrows -> Double {
        try medians(repetitions, body).wall
    }

    /// The medians of `repetitions` runs of `body`, in milliseconds: wall-clock time, and this thread's CPU time
    /// (which tells a slow run from a busy machine: this one has two cores shared with other builds).
    static func medians(_ repetitions: Int, _ body: () throws -> Void) rethrows -> (wall: Double, cpu: Double) {
        let clock = ContinuousClock()
        var times: [Double] = []
        var cpuTimes: [Double] = []
        for _ in 0..<repetitions {
            let cpuStart = threadCPUMilliseconds()
            let start = clock.now
            try body()
            let (seconds, attoseconds) = (clock.now - start).components
            times.append(Double(seconds) * 1000 + Double(attoseconds) / 1e15)
            cpuTimes.append(threadCPUMilliseconds() - cpuStart)
        }
        return (times.sorted()[times.count / 2], cpuTimes.sorted()[cpuTimes.count / 2])
    }

    static func threadCPUMilliseconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) * 1000 + Double(time.tv_nsec) / 1e6
    }

    static func format(_ milliseconds: Double) -> String { String(format: "%.3f ms", milliseconds) }
}

/// Keeps a value alive and observed, so that the optimizer cannot drop the work that made it.
@inline(never) func consume<T>(_ value: T) { withExtendedLifetime(value) {} }
