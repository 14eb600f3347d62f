import Glibc
import Testing

@testable import ChangeServer

/// `LogWriter`: request lines are collected and written in bulk, urgent lines and enough bytes end the collecting,
/// closing writes what waits, and what comes past the capacity is dropped and counted. Each test writes into a
/// pipe of its own and reads it with a deadline far longer than any wait it expects, and far shorter than the
/// collecting interval it configures where the bytes must come without it.
@Suite struct InProcessLogWriterTests {
    /// A pipe whose read end is non-blocking; the writer gets the write end.
    private final class Pipe {
        let read: Int32
        let write: Int32

        init() throws {
            var ends: [Int32] = [0, 0]
            try #require(pipe(&ends) == 0)
            read = ends[0]
            write = ends[1]
            _ = fcntl(read, F_SETFL, fcntl(read, F_GETFL) | O_NONBLOCK)
        }

        deinit {
            close(read)
            close(write)
        }

        /// Reads until `count` bytes came or `seconds` passed.
        func read(count: Int, within seconds: Int32) -> [UInt8] {
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            var descriptor = pollfd(fd: read, events: Int16(POLLIN), revents: 0)
            var remaining = seconds * 1000
            while received.count < count && remaining > 0 {
                let before = MonotonicClock.now()
                guard poll(&descriptor, 1, remaining) > 0 else { break }
                let got = Glibc.read(read, &buffer, buffer.count)
                if got > 0 { received += buffer[0..<got] }
                remaining -= Int32(MonotonicClock.now() - before)
            }
            return received
        }

        /// What is in the pipe now, without waiting.
        func available() -> [UInt8] {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let got = Glibc.read(read, &buffer, buffer.count)
            return got > 0 ? Array(buffer[0..<got]) : []
        }
    }

    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func anUrgentLineEndsTheCollectingAndKeepsTheOrder() throws {
        let pipe = try Pipe()
        let writer = LogWriter(flushInterval: .seconds(600), descriptor: pipe.write)
        defer { writer.close() }
        writer.submit(bytes("GET /a 200 0ms\n"), lines: 1)
        writer.submit(bytes("warning disk\n"), lines: 1, urgent: true)
        let expected = bytes("GET /a 200 0ms\nwarning disk\n")
        #expect(pipe.read(count: expected.count, within: 20) == expected)
    }

    @Test func enoughBytesEndTheCollecting() throws {
        let pipe = try Pipe()
        let writer = LogWriter(flushBytes: 20, flushInterval: .seconds(600), descriptor: pipe.write)
        defer { writer.close() }
        writer.submit(bytes("GET /a 200 0ms\n"), lines: 1)
        writer.submit(bytes("GET /b 200 0ms\n"), lines: 1)
        let expected = bytes("GET /a 200 0ms\nGET /b 200 0ms\n")
        #expect(pipe.read(count: expected.count, within: 20) == expected)
    }

    @Test func requestLinesAreWrittenAfterTheInterval() throws {
        let pipe = try Pipe()
        let writer = LogWriter(flushInterval: .milliseconds(20), descriptor: pipe.write)
        defer { writer.close() }
        for turn in 0..<3 {
            let line = bytes("GET /\(turn) 200 0ms\n")
            writer.submit(line, lines: 1)
            #expect(pipe.read(count: line.count, within: 20) == line)
        }
    }

    @Test func closingWritesWhatWaits() throws {
        let pipe = try Pipe()
        let writer = LogWriter(flushInterval: .seconds(600), descriptor: pipe.write)
        writer.submit(bytes("GET /a 200 0ms\n"), lines: 1)
        writer.submit(bytes("GET /b 200 0ms\n"), lines: 1)
        writer.close()
        #expect(pipe.available() == bytes("GET /a 200 0ms\nGET /b 200 0ms\n"))
        writer.submit(bytes("stopped\n"), lines: 1)
        #expect(pipe.available() == bytes("stopped\n"))
    }

    @Test func linesPastTheCapacityAreDroppedAndCounted() throws {
        let pipe = try Pipe()
        let writer = LogWriter(capacity: 20, flushBytes: 1000, flushInterval: .seconds(600), descriptor: pipe.write)
        writer.submit(bytes("GET /a 200 0ms\n"), lines: 1)
        writer.submit(bytes("GET /b 200 0ms\nGET /c 200 0ms\n"), lines: 2)
        #expect(writer.droppedLines == 2)
        writer.close()
        #expect(pipe.available() == bytes("GET /a 200 0ms\n"))
    }
}
