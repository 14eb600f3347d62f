import Dispatch
import Foundation
import Glibc
import ProcessSupport
import Synchronization
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

        /// Fills the pipe, so that the next write blocks until it is read; returns the bytes written.
        func fill() -> Int {
            let flags = fcntl(write, F_GETFL)
            _ = fcntl(write, F_SETFL, flags | O_NONBLOCK)
            defer { _ = fcntl(write, F_SETFL, flags) }
            let chunk = [UInt8](repeating: 0x2E, count: 4096)
            var filled = 0
            while true {
                let count = Glibc.write(write, chunk, chunk.count)
                guard count > 0 else { return filled }
                filled += count
            }
        }

        /// What is in the pipe now, without waiting.
        func available() -> [UInt8] {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let got = Glibc.read(read, &buffer, buffer.count)
            return got > 0 ? Array(buffer[0..<got]) : []
        }
    }

    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// Runs `body` with a writer into a pipe of its own, and closes the writer (while the pipe is still open) at the
    /// end.
    private func withWriter(
        capacity: Int = 256 << 10, flushBytes: Int = 64 << 10, flushInterval: DispatchTimeInterval,
        _ body: (Pipe, LogWriter) throws -> Void
    ) throws {
        let pipe = try Pipe()
        let writer = LogWriter(
            capacity: capacity, flushBytes: flushBytes, flushInterval: flushInterval, descriptor: pipe.write)
        defer { writer.close() }
        try body(pipe, writer)
    }

    @Test func anUrgentLineEndsTheCollectingAndKeepsTheOrder() throws {
        try withWriter(flushInterval: .seconds(600)) { pipe, writer in
            writer.submit(bytes("GET /a 200 0ms\n"), lines: 1)
            writer.submit(bytes("warning disk\n"), lines: 1, urgent: true)
            let expected = bytes("GET /a 200 0ms\nwarning disk\n")
            #expect(pipe.read(count: expected.count, within: 20) == expected)
        }
    }

    @Test func enoughBytesEndTheCollecting() throws {
        try withWriter(flushBytes: 20, flushInterval: .seconds(600)) { pipe, writer in
            writer.submit(bytes("GET /a 200 0ms\n"), lines: 1)
            writer.submit(bytes("GET /b 200 0ms\n"), lines: 1)
            let expected = bytes("GET /a 200 0ms\nGET /b 200 0ms\n")
            #expect(pipe.read(count: expected.count, within: 20) == expected)
        }
    }

    @Test func requestLinesAreWrittenAfterTheInterval() throws {
        try withWriter(flushInterval: .milliseconds(20)) { pipe, writer in
            for turn in 0..<3 {
                let line = bytes("GET /\(turn) 200 0ms\n")
                writer.submit(line, lines: 1)
                #expect(pipe.read(count: line.count, within: 20) == line)
            }
        }
    }

    @Test func requestLinesWaitToBeCollectedAndClosingWritesThem() throws {
        let pipe = try Pipe()
        let writer = LogWriter(flushInterval: .seconds(600), descriptor: pipe.write)
        writer.submit(bytes("GET /a 200 0ms\n"), lines: 1)
        writer.submit(bytes("GET /b 200 0ms\n"), lines: 1)
        // Nothing to await here: the lines must not come. A writer that wrote at once would have written them
        // within this tenth of a second; the collecting interval is ten minutes.
        usleep(100_000)
        #expect(pipe.available().isEmpty)
        writer.close()
        #expect(pipe.available() == bytes("GET /a 200 0ms\nGET /b 200 0ms\n"))
        writer.submit(bytes("stopped\n"), lines: 1)
        #expect(pipe.available() == bytes("stopped\n"))
    }

    @Test func aLargeBatchGoesWhileTheWriterOnlyCollects() throws {
        try withWriter(capacity: 100, flushBytes: 50, flushInterval: .seconds(600)) { pipe, writer in
            let first = bytes("GET /a 200 0ms\n")
            let fanOut = Array(repeating: bytes("GET /v1/collections/c/changes 200 9ms\n"), count: 100).flatMap { $0 }
            writer.submit(first, lines: 1)
            writer.submit(fanOut, lines: 100)
            #expect(writer.droppedLines == 0)
            #expect(pipe.read(count: first.count + fanOut.count, within: 20) == first + fanOut)
        }
    }

    @Test func linesPastTheCapacityAreDroppedAndCounted() throws {
        let pipe = try Pipe()
        let filler = pipe.fill()
        let writer = LogWriter(capacity: 20, flushBytes: 10, flushInterval: .seconds(600), descriptor: pipe.write)
        let line = { (name: String) in Array("GET /\(name) 200 0ms\n".utf8) }
        writer.submit(line("a"), lines: 1, urgent: true)
        writer.submit(line("b"), lines: 1)
        writer.submit(line("c"), lines: 1)
        // The writer is stuck writing into the full pipe. Whether or not it took the first line before the second
        // came, the third finds 15 bytes waiting, more than `flushBytes`, and no room under `capacity`.
        let dropped = writer.droppedLines
        #expect(dropped == 1 || dropped == 2)
        let expected = dropped == 2 ? line("a") : line("a") + line("b")
        let written = pipe.read(count: filler + expected.count, within: 20)
        writer.close()
        #expect(Array(written.dropFirst(filler)) == expected)
    }

    /// Closing waits for the writer only while stderr takes something: with stderr stuck, the process must
    /// still end.
    @Test func closingGivesUpOnAWriterStuckOnStderr() throws {
        let pipe = try Pipe()
        let filler = pipe.fill()
        let writer = LogWriter(flushInterval: .seconds(600), descriptor: pipe.write)
        writer.submit(Array("warning stuck\n".utf8), lines: 1, urgent: true)
        let started = MonotonicClock.now()
        writer.close(stalledAfter: 50, atMost: 600_000)
        #expect(MonotonicClock.now() - started < 10_000)
        // The writer is still blocked in its write; reading the pipe lets it finish, with the line.
        let written = pipe.read(count: filler + 14, within: 20)
        #expect(Array(written.dropFirst(filler)) == Array("warning stuck\n".utf8))
    }

    /// A writer holding 6,000 request lines (about 175 KiB) behind a full pipe, and a reader that takes 4 KiB about
    /// every 10 ms until it has read everything or `reading.stop`: a slow stderr, half a second of writing or more.
    private func slowStderr(_ pipe: Pipe) -> (writer: LogWriter, reading: Reading, reader: Thread, total: Int) {
        let filler = pipe.fill()
        let writer = LogWriter(flushInterval: .seconds(600), descriptor: pipe.write)
        let lines = Array(repeating: Array("GET /v1/collections/c 200 0ms\n".utf8), count: 6000).flatMap { $0 }
        writer.submit(lines, lines: 6000, urgent: true)
        let reading = Reading()
        let total = filler + lines.count
        nonisolated(unsafe) let readEnd = pipe
        let reader = Thread {
            while !reading.stop.load(ordering: .relaxed) && reading.read.load(ordering: .relaxed) < total {
                reading.read.add(readEnd.read(count: 4096, within: 1).count, ordering: .relaxed)
                usleep(10_000)
            }
        }
        reader.start()
        return (writer, reading, reader, total)
    }

    /// What the reader of `slowStderr` has read, and when it is to stop.
    private final class Reading: Sendable {
        let read = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
    }

    /// A slow stderr keeps the lines: closing waits while it takes them, longer than it would wait for one that
    /// takes nothing. A total wait of 1 s lost a third of a stop's lines to a log shipper that paused for 2 s.
    @Test func closingWaitsForAStderrThatTakesWhatWaits() throws {
        let pipe = try Pipe()
        let (writer, reading, reader, total) = slowStderr(pipe)
        // Past the stall limit given, with a piece of 16 KiB (`LogWriter.writeChunk`) written every 40 ms or so.
        writer.close(stalledAfter: 200, atMost: 600_000)
        reading.stop.store(true, ordering: .relaxed)
        #expect(waitUntil(timeout: 20) { reader.isFinished })
        var rest = 0
        while case let piece = pipe.available(), !piece.isEmpty { rest += piece.count }
        #expect(reading.read.load(ordering: .relaxed) + rest == total)
    }

    /// Two closes at once (the main thread's, and a signal's that then ends the process) both wait for the lines:
    /// the second returned at once, and the process could end with most of them unwritten.
    @Test func aSecondCloseWaitsForTheFirst() throws {
        let pipe = try Pipe()
        let (writer, reading, reader, total) = slowStderr(pipe)
        let unreadWhenReturned = Mutex<[Int]>([])
        let closers = (0..<2).map { _ in
            Thread {
                writer.close(stalledAfter: 5_000, atMost: 600_000)
                unreadWhenReturned.withLock { $0.append(total - reading.read.load(ordering: .relaxed)) }
            }
        }
        for closer in closers { closer.start() }
        #expect(waitUntil(timeout: 60) { unreadWhenReturned.withLock { $0.count } == 2 })
        // Once the writer is done, what is unread is in the pipe, which holds at most what filled it, or in the
        // reader's hands (one read of up to 4 KiB, not yet counted).
        let getPipeSize: Int32 = 1032  // F_GETPIPE_SZ, which the Glibc module does not export
        let capacity = Int(fcntl(pipe.write, getPipeSize))
        #expect(capacity > 0)
        #expect(
            unreadWhenReturned.withLock { $0 }.allSatisfy { $0 <= capacity + 4096 },
            "\(unreadWhenReturned.withLock { $0 })")
        #expect(waitUntil(timeout: 60) { reader.isFinished })
        #expect(reading.read.load(ordering: .relaxed) == total)
    }

    /// Each system call writes whole lines where a line fits in one (a file shared with other writers through
    /// `O_APPEND` keeps each line whole), and at most `writeChunk` bytes.
    @Test func writesEndAtLineEnds() {
        let chunk = LogWriter.writeChunk
        let line = Array("GET /v1/collections/c 200 0ms\n".utf8)
        let lines = Array(repeating: line, count: 2000).flatMap { $0 }
        var offset = 0
        var pieces = 0
        while offset < lines.count {
            let end = LogWriter.pieceEnd(of: lines, from: offset)
            guard end > offset && end - offset <= chunk else {
                Issue.record("a piece from \(offset) to \(end)")
                return
            }
            #expect(lines[end - 1] == UInt8(ascii: "\n"))
            offset = end
            pieces += 1
        }
        // Each piece but the last holds as many whole lines as fit.
        let perPiece = chunk / line.count * line.count
        #expect(pieces == (lines.count + perPiece - 1) / perPiece)
        let long = [UInt8](repeating: 0x61, count: chunk + 10) + [0x0A]
        #expect(LogWriter.pieceEnd(of: long, from: 0) == chunk)
        #expect(LogWriter.pieceEnd(of: long, from: chunk) == long.count)
        #expect(LogWriter.pieceEnd(of: [0x61, 0x62], from: 0) == 2)
    }

    /// Closing gives up after its limit even while stderr takes something: a trickle must not hold the process up
    /// for good either. The reader goes on until the writer, left behind, has written everything.
    @Test func closingGivesUpAfterItsLimitEvenOnAStderrThatTakes() throws {
        let pipe = try Pipe()
        let (writer, reading, reader, total) = slowStderr(pipe)
        writer.close(stalledAfter: 600_000, atMost: 100)
        // Most of the writing was left when it returned.
        #expect(reading.read.load(ordering: .relaxed) < total)
        #expect(waitUntil(timeout: 60) { reader.isFinished })
        #expect(reading.read.load(ordering: .relaxed) == total)
    }

    @Test(arguments: [0x00, 0x09, 0x1B, 0x1F, 0x7F, 0x80, 0xC3, 0xFF, 0x22, 0x5C])
    func aRequestLineEscapesWhatCouldForgeALine(byte: UInt8) {
        var path = Array("/v1/collections/a".utf8)
        path.append(byte)
        var line: [UInt8] = []
        path.withUnsafeBufferPointer { path in
            line.appendRequestLine(
                prefix: bytes("T info "), method: "G\nET", path: path, status: 404, milliseconds: 12)
        }
        // The test's own reading of the rule: control bytes, DEL, bytes past ASCII, `"` and `\` as `\xHH`.
        let hex = Array("0123456789ABCDEF")
        let escapedPath = path.map { byte in
            byte < 0x20 || byte >= 0x7F || byte == 0x22 || byte == 0x5C
                ? "\\x\(hex[Int(byte >> 4)])\(hex[Int(byte & 0xF)])" : String(UnicodeScalar(byte))
        }.joined()
        #expect(String(decoding: line, as: UTF8.self) == "T info G\\x0AET \(escapedPath) 404 12ms\n")
        #expect(!line.dropLast().contains { $0 < 0x20 || $0 >= 0x7F || $0 == 0x22 })
    }

    /// Log lines are stamped with the time in UTC, to the millisecond, as ISO 8601 writes it.
    @Test func theTimestampIsTheTimeNowInUTC() throws {
        let before = Date()
        let stamp = Logger.timestamp()
        let after = Date()
        #expect(stamp.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/) != nil, "\(stamp)")
        let parser = ISO8601DateFormatter()
        parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let time = try #require(parser.date(from: stamp))
        #expect(time >= before.addingTimeInterval(-0.001) && time <= after, "\(stamp)")
    }

    /// Fields are zero-padded to their width, the year is written whole, and the milliseconds are truncated.
    @Test(arguments: [
        (0, 0, "1970-01-01T00:00:00.000Z"),
        (1_764_658_550, 359_999_999, "2025-12-02T06:55:50.359Z"),
        (951_782_399, 999_000_000, "2000-02-28T23:59:59.999Z"),
        (253_402_300_800, 1_000_000, "10000-01-01T00:00:00.001Z"),
    ])
    func aTimestampIsWrittenInFullForAnyTime(seconds: Int, nanoseconds: Int, expected: String) {
        var bytes = Array("x ".utf8)
        Logger.appendTimestamp(to: &bytes, at: timespec(tv_sec: seconds, tv_nsec: nanoseconds))
        #expect(String(decoding: bytes, as: UTF8.self) == "x " + expected)
    }

    /// A line with nothing to escape is written in one pass: after what the buffer holds, exactly these bytes.
    @Test(arguments: [(200, 0), (304, 9), (404, 10), (503, 12345), (-1, -5)])
    func aRequestLineIsWrittenExactly(status: Int, milliseconds: Int) {
        var line = bytes("earlier\n")
        Array("/v1/collections/inbox".utf8).withUnsafeBufferPointer { path in
            line.appendRequestLine(
                prefix: bytes("T info "), method: "HEAD", path: path, status: status, milliseconds: milliseconds)
        }
        let expected = "earlier\nT info HEAD /v1/collections/inbox \(max(status, 0)) \(max(milliseconds, 0))ms\n"
        #expect(String(decoding: line, as: UTF8.self) == expected)
    }
}
