import ChangeFeedClient
import Foundation

/// Counts the heap allocations of decoding the 1 MB answer, ours and `JSONSerialization`'s. The count comes from
/// a tiny allocator shim (`malloc`, `calloc`, `realloc`, `posix_memalign`, `aligned_alloc` forwarded to glibc,
/// each call counted) that the benchmark compiles with `cc` and preloads into a second run of itself.
enum AllocationBench {
    static let shimSource = """
        #include <stddef.h>
        #include <stdatomic.h>
        extern void *__libc_malloc(size_t);
        extern void *__libc_calloc(size_t, size_t);
        extern void *__libc_realloc(void *, size_t);
        extern void *__libc_memalign(size_t, size_t);
        static _Atomic unsigned long count;
        unsigned long clientbench_allocations(void) { return atomic_load(&count); }
        void *malloc(size_t n) { atomic_fetch_add(&count, 1); return __libc_malloc(n); }
        void *calloc(size_t m, size_t n) { atomic_fetch_add(&count, 1); return __libc_calloc(m, n); }
        void *realloc(void *p, size_t n) { atomic_fetch_add(&count, 1); return __libc_realloc(p, n); }
        void *aligned_alloc(size_t a, size_t n) { atomic_fetch_add(&count, 1); return __libc_memalign(a, n); }
        int posix_memalign(void **p, size_t a, size_t n) {
            atomic_fetch_add(&count, 1);
            *p = __libc_memalign(a, n);
            return *p ? 0 : 12;
        }
        """

    static func run() {
        print("== allocations while decoding the same answer")
        guard let counterSymbol = dlsym(nil, "clientbench_allocations") else {
            rerunCounted()
            return
        }
        typealias Counter = @convention(c) () -> UInt
        let allocations = unsafeBitCast(counterSymbol, to: Counter.self)
        let bytes = DecodeBench.answer()
        let data = Data(bytes)
        func count(_ body: () throws -> Void) rethrows -> UInt {
            let start = allocations()
            try body()
            return allocations() - start
        }
        do {
            _ = try FeedEvent(decoding: bytes)  // warm up what the runtime builds lazily
            _ = try JSONSerialization.jsonObject(with: data)
            let ours = try count { consume(try FeedEvent(decoding: bytes)) }
            let baseline = try count { consume(try JSONSerialization.jsonObject(with: data)) }
            print(
                "  FeedEvent(decoding:) \(ours) allocations; JSONSerialization alone \(baseline); "
                    + "ratio \(String(format: "%.2f", Double(ours) / Double(max(baseline, 1))))")
        } catch {
            print("  failed: \(error)")
        }
    }

    /// Compiles the shim and runs `ClientBench allocations` again with it preloaded.
    static func rerunCounted() {
        let directory = NSTemporaryDirectory() + "/clientbench-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try shimSource.write(toFile: directory + "/shim.c", atomically: true, encoding: .utf8)
            let compile = try run(
                "/usr/bin/env", ["cc", "-O2", "-shared", "-fPIC", "-o", directory + "/shim.so", directory + "/shim.c"])
            guard compile.status == 0 else {
                print("  could not compile the counting shim (cc): allocations not counted")
                return
            }
            let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
            let counted = try run(executable, ["allocations"], preload: directory + "/shim.so")
            print(counted.output.split(separator: "\n").dropFirst().joined(separator: "\n"))
        } catch {
            print("  could not run counted: \(error)")
        }
    }

    static func run(_ program: String, _ arguments: [String], preload: String? = nil) throws -> (
        status: Int32, output: String
    ) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        if let preload { environment["LD_PRELOAD"] = preload }
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }
}
