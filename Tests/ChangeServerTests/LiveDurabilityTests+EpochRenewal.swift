import Foundation
import ProcessSupport
import Testing

/// New epochs when a start may have lost versions clients saw (`EpochRenewal`): a cut tail, and a machine restart
/// after an unclean stop under `--fsync interval`; and none when nothing acknowledged can be lost.
extension LiveDurabilityTests {
    /// A corrupt byte after the last record (what a damaged sector in the last, answered, pass looks like): the
    /// tail is cut, every collection and view gets a new epoch with its content, the old cursors are `410`, a
    /// snapshot makes the epochs durable at once, and the next start keeps them.
    @Test func aCutTailGivesEveryCollectionANewEpochOnce() throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var server = try ServerProcess(dataDirectory: directory)
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        for index in 0..<5 { _ = try server.client.put("/v1/collections/c/items/i\(index)", ["data": index]) }
        #expect(try server.client.put("/v1/views/v", ["source": "c"]).status == 201)
        let old = try Self.version(server, "/v1/collections/c")
        let content = try server.client.get("/v1/collections/c").text.replacingOccurrences(of: old, with: "V")
        let oldView = try Self.version(server, "/v1/views/v")
        #expect(old.hasSuffix(".6"))
        kill(server.process.processIdentifier, SIGKILL)
        server.process.waitUntilExit()

        try Self.damageAfterTheLastRecord(in: directory)
        server = try ServerProcess(dataDirectory: directory)
        #expect(server.log.contains("every collection and view gets a new epoch"), "\(server.log)")
        #expect(server.log.contains("the journal's tail was cut"), "\(server.log)")
        let renewed = try Self.version(server, "/v1/collections/c")
        let renewedView = try Self.version(server, "/v1/views/v")
        #expect(Self.epoch(renewed) != Self.epoch(old) && renewed.hasSuffix(".1"))
        #expect(Self.epoch(renewedView) != Self.epoch(oldView) && renewedView.hasSuffix(".1"))
        let after = try server.client.get("/v1/collections/c").text.replacingOccurrences(of: renewed, with: "V")
        #expect(after == content)
        #expect(try server.client.get("/v1/collections/c/changes?since=\(old)").status == 410)
        #expect(try server.client.get("/v1/views/v/changes?since=\(oldView)").status == 410)
        // The snapshot that holds the new epochs lets the note go.
        let marker = directory + "/epochs-renewal"
        #expect(waitUntil(timeout: 20) { !FileManager.default.fileExists(atPath: marker) }, "\(server.log)")
        #expect(try server.client.put("/v1/collections/c/items/late", ["data": 1]).status == 201)
        let later = try Self.version(server, "/v1/collections/c")
        #expect(later == "\(Self.epoch(renewed)).2")
        #expect(server.stop() == 0)

        server = try ServerProcess(dataDirectory: directory)
        #expect(!server.log.contains("gets a new epoch"), "\(server.log)")
        #expect(try Self.version(server, "/v1/collections/c") == later)
        #expect(try server.client.get("/v1/collections/c/changes?since=\(renewed)").status == 200)
    }

    /// `--fsync interval`: a crash of the process alone loses nothing (the kernel's cache holds every write) and
    /// renews nothing; a crash followed by a restart of the machine (another boot id in `last-run`) may have lost
    /// acknowledged writes, and renews every epoch. Under `--fsync always`, or after a clean stop, it does not.
    @Test func aMachineRestartAfterACrashRenewsEpochsOnlyWhereWritesCouldBeLost() throws {
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var lastStop = SIGKILL
        func run(_ fsync: String, boot: String?, stop signal: Int32) throws -> (String, renewed: Bool) {
            let lastRun = directory + "/last-run"
            let fields = try String(contentsOfFile: lastRun, encoding: .utf8).split(whereSeparator: \.isWhitespace)
            // The server says how the run before it ended.
            #expect(fields.count == 3 && fields[2] == (lastStop == SIGKILL ? "running" : "closed"), "\(fields)")
            if let boot {
                try "\(boot) \(fields[1]) \(fields[2])".write(toFile: lastRun, atomically: true, encoding: .utf8)
            }
            let server = try ServerProcess(["--fsync", fsync], dataDirectory: directory)
            let renewed = server.log.contains("every collection and view gets a new epoch")
            // Until a snapshot holds the new epochs, a crash renews them again (harmless, and not this test's).
            #expect(waitUntil(timeout: 20) { !FileManager.default.fileExists(atPath: directory + "/epochs-renewal") })
            #expect(try server.client.put("/v1/collections/c/items/x\(UUID().uuidString.prefix(8))", [:]).status == 201)
            let version = try Self.version(server, "/v1/collections/c")
            lastStop = signal
            if signal == SIGKILL {
                kill(server.process.processIdentifier, SIGKILL)
                server.process.waitUntilExit()
            } else {
                #expect(server.stop() == 0)
            }
            return (version, renewed)
        }
        var server = try ServerProcess(["--fsync", "interval"], dataDirectory: directory)
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        kill(server.process.processIdentifier, SIGKILL)
        server.process.waitUntilExit()

        let (first, renewedAfterProcessCrash) = try run("interval", boot: nil, stop: SIGKILL)
        #expect(!renewedAfterProcessCrash)
        let (second, renewedAfterMachineRestart) = try run("always", boot: "another-boot", stop: SIGKILL)
        #expect(renewedAfterMachineRestart)
        #expect(Self.epoch(second) != Self.epoch(first))
        // The run before was `always`: a machine restart after its crash lost nothing acknowledged.
        let (third, renewedAfterAlways) = try run("interval", boot: "yet-another-boot", stop: SIGTERM)
        #expect(!renewedAfterAlways)
        #expect(Self.epoch(third) == Self.epoch(second))
        // A clean stop under `interval` synced and closed its journal.
        let (_, renewedAfterCleanStop) = try run("interval", boot: "a-fourth-boot", stop: SIGTERM)
        #expect(!renewedAfterCleanStop)
        server = try ServerProcess(dataDirectory: directory)
        #expect(Self.epoch(try Self.version(server, "/v1/collections/c")) == Self.epoch(second))
    }

    static func version(_ server: ServerProcess, _ path: String) throws -> String {
        try #require(try server.client.get(path).object["version"] as? String)
    }

    static func epoch(_ version: String) -> Substring { version.split(separator: ".")[0] }

    /// Writes a few bytes that are not zeros right after the last record of the newest segment (among the zeros
    /// written ahead): a frame that does not check out, with no mark after it.
    static func damageAfterTheLastRecord(in directory: String) throws {
        let segments = try FileManager.default.contentsOfDirectory(atPath: directory).filter {
            $0.hasPrefix("journal-") && $0.hasSuffix(".log")
        }
        let path = directory + "/" + (try #require(segments.sorted().last))
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let end = try #require(bytes.lastIndex { $0 != 0 }) + 1
        let garbage: [UInt8] = [0xAB, 0xCD, 0xEF, 0x01, 0x23, 0x45, 0x67, 0x89]
        if end + garbage.count <= bytes.count {
            bytes.replaceSubrange(end..<end + garbage.count, with: garbage)
        } else {
            bytes += garbage
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }
}
