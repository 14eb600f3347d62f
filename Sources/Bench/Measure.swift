import Glibc
import Model

/// Timing and memory measurement for the benchmarks.
enum Measure {
    /// Runs `body` `repetitions` times and returns the median wall-clock and CPU durations in milliseconds, with
    /// the last result. The CPU time tells apart a slow run from a busy machine (this one has two cores).
    static func median<T>(_ repetitions: Int, _ body: () -> T) -> (milliseconds: Double, cpu: Double, result: T) {
        var times: [Double] = []
        var cpuTimes: [Double] = []
        var result: T?
        let clock = ContinuousClock()
        for _ in 0..<repetitions {
            result = nil  // the previous run's result is freed before the clock starts, not timed with this run
            let cpuStart = cpuMilliseconds()
            let start = clock.now
            result = body()
            times.append(milliseconds(clock.now - start))
            cpuTimes.append(cpuMilliseconds() - cpuStart)
        }
        times.sort()
        cpuTimes.sort()
        return (times[times.count / 2], cpuTimes[cpuTimes.count / 2], result!)
    }

    /// The CPU time this process has used, in milliseconds.
    static func cpuMilliseconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
        return Double(time.tv_sec) * 1000 + Double(time.tv_nsec) / 1e6
    }

    static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }

    /// Resets the kernel's peak resident set size of this process (Linux `clear_refs` 5).
    static func resetPeakMemory() {
        guard let file = fopen("/proc/self/clear_refs", "w") else { return }
        fputs("5", file)
        fclose(file)
    }

    /// The peak resident set size of this process since the last reset, in MiB (`VmHWM`).
    static func peakMemoryMiB() -> Double {
        guard let file = fopen("/proc/self/status", "r") else { return -1 }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 512)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard text.hasPrefix("VmHWM:") else { continue }
            let digits = text.filter(\.isNumber)
            return (Double(digits) ?? -1) / 1024
        }
        return -1
    }
}

/// A longest increasing subsequence length, for the minimal number of moves (survivors minus it).
func lisLength(_ keys: [Int]) -> Int {
    var tails: [Int] = []
    for key in keys {
        var low = 0
        var high = tails.count
        while low < high {
            let mid = (low + high) / 2
            if tails[mid] < key { low = mid + 1 } else { high = mid }
        }
        if low == tails.count { tails.append(key) } else { tails[low] = key }
    }
    return tails.count
}

/// Model's SplitMix64, so that every input is the same from run to run.
typealias SeededGenerator = SplitMix64

extension SplitMix64 {
    /// A random UUID-shaped string.
    mutating func uuid() -> String {
        let hex = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(36)
        for group in [8, 4, 4, 4, 12] {
            if !bytes.isEmpty { bytes.append(UInt8(ascii: "-")) }
            for _ in 0..<group { bytes.append(hex[Int(next() & 15)]) }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
