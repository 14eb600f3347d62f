import Foundation
import ProcessSupport
import Testing

/// A small disk's room, against a real server on a tmpfs: what the journal's zeros written ahead and a snapshot
/// that cannot be written do to it.
extension LiveHardeningTests {
    /// With `--fsync always` the journal writes up to 2 MiB of zeros ahead of its records. On a 4 MiB disk whose
    /// reserve (500 KB) holds a snapshot (60 KB) but not those zeros, one write took the free space from above the
    /// reserve to none; every compaction then failed to start its new segment (`No space left on device`), and
    /// writes stayed refused for good, restarts included. The zeros of the segment closed are now cut when the
    /// journal moves on, and writes come back.
    @Test func theZerosWrittenAheadDoNotKeepASmallDiskFull() throws {
        let (mountPoint, data) = try Self.smallDisk()
        defer { Self.unmount(mountPoint) }
        let server = try ServerProcess(
            ["--disk-reserve-bytes", "500000", "--history", "20", "--fsync", "always"], dataDirectory: data)
        #expect(try server.client.put("/v1/collections/o", ["sections": [["id": "s"]]]).status == 201)
        let refusal = try Self.writeUntilRefused(server, padding: 2000)
        #expect(refusal?.errorCode == "insufficient_storage", "the journal never reached the reserve")
        // Compaction for space starts at most every 10 s.
        #expect(
            try Self.writesResume(server, "/v1/collections/o/items/after", within: 25), "\(server.log.suffix(2000))")
        #expect(!server.log.contains("cannot start a new journal segment"), "\(server.log.suffix(2000))")
        #expect(FileManager.default.fileExists(atPath: data + "/snapshot.bin"))
    }

    /// A journal that cannot move on to a new segment (here a directory stands where the segment goes; on a full
    /// disk, no room for it) keeps its records where they are, and its snapshot is tried again a second later: not
    /// by every record applied meanwhile, each of which logged the failure again (hundreds of lines a second on a
    /// full disk). Once the segment can be made, the next try compacts the journal.
    @Test func aJournalThatCannotMoveOnTriesAgainOnceASecond() throws {
        let server = try ServerProcess(["--snapshot-bytes", "100000", "--fsync", "always"])
        let data = server.dataDirectory
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        let blocker = data + "/journal-00000000000000000002.log"
        try FileManager.default.createDirectory(atPath: blocker, withIntermediateDirectories: false)
        let padding = String(repeating: "p", count: 200)
        let failures = { server.logCount(of: "cannot start a new journal segment") }
        var round = 0
        func write() throws {
            let response = try server.client.put(
                "/v1/collections/c/items/i\(round % 100)", ["data": "\(round)-\(padding)"])
            try #require(response.status == 200 || response.status == 201, "\(response.text)")
            round += 1
        }
        // Writes until the journal first fails to move on (past --snapshot-bytes: some 330 records, however slowly
        // a loaded machine takes them), then for three seconds more: every write there once logged the failure.
        let moving = Date()
        while failures() == 0 && round < 20_000 && Date().timeIntervalSince(moving) < 60 { try write() }
        #expect(failures() >= 1, "the journal never tried to move on\n\(server.log.suffix(2000))")
        let (started, failedBefore, writtenBefore) = (Date(), failures(), round)
        while Date().timeIntervalSince(started) < 3 && round < 40_000 { try write() }
        let seconds = Date().timeIntervalSince(started)
        let written = round - writtenBefore
        let failed = failures() - failedBefore
        #expect(written >= 20, "\(written) writes in \(seconds) s: too few to tell")
        #expect(Double(failed) <= seconds + 2, "\(failed) failures logged in \(seconds) s over \(written) writes")
        try FileManager.default.removeItem(atPath: blocker)
        #expect(
            waitUntil(timeout: 10) {
                (try? server.client.put("/v1/collections/c/items/after", ["data": 1]).status) != nil
                    && server.log.contains("snapshot of 1 collections")
            }, "\(server.log.split(separator: "\n").filter { !$0.contains(" info PUT") }.suffix(20))")
    }

    /// A snapshot being written when the server was killed is never renamed into place, so never read: the next
    /// start removes it (it kept the size of the data on the disk until the next snapshot replaced it).
    @Test func aSnapshotLeftHalfWrittenIsRemovedAtStart() throws {
        let data = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: data) }
        let leftover = data + "/snapshot.bin.tmp"
        #expect(FileManager.default.createFile(atPath: leftover, contents: Data(count: 1 << 20)))
        let server = try ServerProcess([], dataDirectory: data)
        #expect(try server.client.get("/healthz").status == 200)
        #expect(!FileManager.default.fileExists(atPath: leftover))
    }

    /// A server started with less free space than its reserve says so at once, since every write will be refused
    /// while `/healthz` reads ok.
    @Test func aStartBelowTheReserveIsLogged() throws {
        let server = try ServerProcess(["--disk-reserve-bytes", String(1 << 50)])
        // Still `200`: reads and feeds go on. The body says why writes get `503` (a probe that passed while every
        // write failed told an operator nothing).
        let health = try server.client.get("/healthz")
        #expect(health.status == 200)
        #expect(health.text == #"{"status":"ok","store":{"backend":"file","state":"full"}}"#)
        #expect(waitUntil(timeout: 10) { server.log.contains("less than the \(1 << 50) kept for snapshots") })
        #expect(try server.client.put("/v1/collections/c", ["sections": []]).errorCode == "insufficient_storage")
        let roomy = try ServerProcess(["--disk-reserve-bytes", "0"])
        #expect(try roomy.client.get("/healthz").text == #"{"status":"ok"}"#)
    }

    /// A data directory the server may write in but not list (mode 0333) stops the start. It was taken for an
    /// empty one: recovery found no segment, and the first write started segment 1 over the journal it could not
    /// see. As root, the server runs without the capabilities that read any directory.
    @Test func aDataDirectoryThatCannotBeListedStopsTheStart() throws {
        let data = try Self.dataDirectoryKeepingOneCollection()
        defer { try? FileManager.default.removeItem(atPath: data) }
        #expect(chmod(data, 0o333) == 0)
        let launcher =
            getuid() == 0 ? ["/usr/bin/setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"] : []
        #expect {
            _ = try ServerProcess(dataDirectory: data, launcher: launcher)
        } throws: { error in
            "\(error)".contains("cannot list the data directory \(data): Permission denied")
        }
        #expect(chmod(data, 0o755) == 0)
        let restarted = try ServerProcess(dataDirectory: data)
        #expect(try restarted.client.get("/v1/collections/kept").status == 200)
    }

    /// A data directory a server wrote the collection `kept` to, and stopped.
    private static func dataDirectoryKeepingOneCollection() throws -> String {
        let data = try ServerProcess.temporaryDirectory()
        let server = try ServerProcess(dataDirectory: data)
        #expect(try server.client.put("/v1/collections/kept", ["sections": [["id": "s"]]]).status == 201)
        #expect(server.stop() == 0)
        return data
    }

    /// A journal segment the server may not write (a volume's files owned by another user) is refused before the
    /// replay, not after it, which each restart did again. As root, the server runs without the capability that
    /// writes any file.
    @Test func aJournalThatCannotBeWrittenStopsTheStartBeforeItsReplay() throws {
        let data = try Self.dataDirectoryKeepingOneCollection()
        defer { try? FileManager.default.removeItem(atPath: data) }
        let segments = try FileManager.default.contentsOfDirectory(atPath: data).filter {
            $0.hasPrefix("journal-") && $0.hasSuffix(".log")
        }
        let newest = try #require(segments.sorted().last)
        #expect(chmod(data + "/" + newest, 0o444) == 0)
        let launcher = getuid() == 0 ? ["/usr/bin/setpriv", "--bounding-set=-dac_override", "--"] : []
        #expect {
            _ = try ServerProcess(dataDirectory: data, launcher: launcher)
        } throws: { error in
            "\(error)".contains("cannot open the journal \(data)/\(newest) for writing: Permission denied")
                && !"\(error)".contains("recovered")
        }
        #expect(chmod(data + "/" + newest, 0o644) == 0)
        let restarted = try ServerProcess(dataDirectory: data)
        #expect(try restarted.client.get("/v1/collections/kept").status == 200)
    }

    /// Below the reserve, a batch of mutations that only delete passes as a `DELETE` does (one that also inserts,
    /// or one in a body of 64 KiB or more, is refused): a client making room in one request was refused `503`.
    @Test func mutationsThatOnlyDeletePassBelowTheReserve() throws {
        let data = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: data) }
        let items = (0..<6).map { ["id": "i\($0)"] }
        do {
            let server = try ServerProcess(["--disk-reserve-bytes", "0"], dataDirectory: data)
            #expect(
                try server.client.put("/v1/collections/c", ["sections": [["id": "s", "items": items]]]).status == 201)
            #expect(server.stop() == 0)
        }
        let server = try ServerProcess(["--disk-reserve-bytes", String(1 << 50)], dataDirectory: data)
        let deletions = try server.client.mutate(
            "c", [["op": "deleteItems", "items": ["i0", "i1"]], ["op": "deleteSections", "sections": ["nope"]]])
        // The second op fails (409), which shows the batch was applied rather than refused for space; and it starts
        // the snapshot that frees the room (its record is in the journal, rejected or not).
        #expect(deletions.status == 409 && deletions.errorCode != "insufficient_storage")
        #expect(waitUntil(timeout: 20) { server.log.contains("snapshot of 1 collections") }, "\(server.log)")
        #expect(try server.metric("changeserver_writes_refused_disk_total") == 0)
        #expect(try server.client.mutate("c", [["op": "deleteItems", "items": ["i0", "i1"]]]).status == 200)
        let mixed = try server.client.mutate(
            "c",
            [["op": "deleteItems", "items": ["i2"]], ["op": "insertItems", "at": ["s", 0], "items": [["id": "n"]]]])
        #expect(mixed.status == 503 && mixed.errorCode == "insufficient_storage")
        #expect(try server.client.put("/v1/collections/c/items/i3", ["data": 1]).errorCode == "insufficient_storage")
        let large = try server.client.mutate(
            "c", [["op": "deleteItems", "items": (0..<5000).map { "not-an-item-\($0)" }]])
        #expect(large.status == 503 && large.errorCode == "insufficient_storage")
        #expect(try server.client.request("DELETE", "/v1/collections/c/items/i3").status == 200)
        let left = try server.client.get("/v1/collections/c").object["sections"] as? [[String: Any]]
        #expect((left?.first?["items"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["i2", "i4", "i5"])
    }

    /// A snapshot that could not be written (the disk held the journal but not a second copy of the data) is tried
    /// again a second later once a record comes, not after the journal grew by `--snapshot-bytes` again: the
    /// journal had moved on to a new segment, whose count started over, so a quiet collection kept its journal
    /// (and a disk under its reserve, where writes are refused, stayed so until a restart).
    @Test func aSnapshotThatCouldNotBeWrittenIsTriedAgainOnceThereIsRoom() throws {
        let (mountPoint, data) = try Self.smallDisk()
        defer { Self.unmount(mountPoint) }
        let server = try ServerProcess(
            ["--disk-reserve-bytes", "0", "--snapshot-bytes", "100000", "--history", "2", "--fsync", "interval"],
            dataDirectory: data)
        let big = String(repeating: "b", count: 1000)
        let content = ["sections": [["id": "s", "items": (0..<1200).map { ["id": "i\($0)", "data": big] }]]]
        #expect(try server.client.put("/v1/collections/c", content).status == 201)
        func snapshots() -> Int { server.logCount(of: "snapshot of 1 collections") }
        #expect(waitUntil(timeout: 20) { snapshots() == 1 })
        // A filler leaves room for the journal's records but not for another snapshot of 1.2 MB.
        var stats = statvfs()
        #expect(statvfs(mountPoint, &stats) == 0)
        let filler = mountPoint + "/filler"
        let room = Int(stats.f_bavail) * Int(stats.f_frsize) - (600 << 10)
        #expect(FileManager.default.createFile(atPath: filler, contents: Data(count: max(0, room))))
        let small = String(repeating: "s", count: 100)
        for round in 0..<2000 where !server.log.contains("snapshot failed") {
            _ = try server.client.put("/v1/collections/c/items/i\(round % 1200)", ["data": "\(round)-\(small)"])
        }
        #expect(server.log.contains("snapshot failed"), "\(server.log.suffix(2000))")
        try FileManager.default.removeItem(atPath: filler)
        // A record every 200 ms for up to 10 s: at most 50, about 7 KB, far fewer than --snapshot-bytes.
        var taken = false
        for round in 0..<50 where !taken {
            _ = try server.client.put("/v1/collections/c/items/i0", ["data": "after \(round)"])
            usleep(200_000)
            taken = snapshots() == 2
        }
        #expect(taken, "\(server.log.split(separator: "\n").filter { !$0.contains(" info PUT") }.suffix(10))")
    }

    /// A write the full disk refuses (`No space left on device`, with no reserve to stop it before) adds nothing to
    /// the journal, and `changeserver_journal_bytes` says so at once: it kept counting the refused record until the
    /// next write went through.
    @Test func aWriteTheDiskRefusesIsNotCountedInTheJournal() throws {
        let (mountPoint, data) = try Self.smallDisk()
        defer { Self.unmount(mountPoint) }
        let server = try ServerProcess(
            ["--disk-reserve-bytes", "0", "--snapshot-bytes", "100000000", "--fsync", "always"], dataDirectory: data)
        #expect(try server.client.put("/v1/collections/o", ["sections": [["id": "s"]]]).status == 201)
        var counted = try server.metric("changeserver_journal_bytes")
        let refusal = try Self.writeUntilRefused(server, padding: 3000) {
            counted = try server.metric("changeserver_journal_bytes")
        }
        #expect(refusal?.errorCode == "storage_unavailable", "\(refusal?.text ?? "the disk never filled")")
        let after = try server.metric("changeserver_journal_bytes")
        #expect(after == counted, "\(String(describing: after)) \(String(describing: counted))")
    }

    /// Upserts items of `padding` bytes into collection `o` (ten of them, rewritten in turn) until a write is
    /// refused `503`, at most 4,000 times, calling `afterEach` after each write that went through; the refusal.
    private static func writeUntilRefused(
        _ server: ServerProcess, padding: Int, afterEach: () throws -> Void = {}
    ) throws -> HTTPResponse? {
        let pad = String(repeating: "q", count: padding)
        for round in 0..<4000 {
            let response = try server.client.put(
                "/v1/collections/o/items/k\(round % 10)", ["data": ["n": round, "pad": pad]])
            if response.status == 503 { return response }
            try #require([200, 201].contains(response.status), "\(response.text)")
            try afterEach()
        }
        return nil
    }

    /// A 4 MiB tmpfs with an empty folder `data` on it, for a server's `--data-dir`; `unmount` it when done.
    private static func smallDisk() throws -> (mountPoint: String, data: String) {
        let mountPoint = try mountTmpfs(size: "4m")
        let data = mountPoint + "/data"
        do {
            try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: false)
        } catch {
            unmount(mountPoint)
            throw error
        }
        return (mountPoint, data)
    }

    /// A journal that fills the disk before it reaches `--snapshot-bytes` (64 MiB here, on a 16 MiB tmpfs): once
    /// writes are refused for the reserve, a snapshot compacts it, and writes come back without a restart (they
    /// stayed refused for good, since refused writes never grow the journal to the snapshot threshold).
    @Test func aJournalThatFillsTheDiskIsCompactedWithoutARestart() throws {
        let mountPoint = try Self.mountTmpfs()
        defer { Self.unmount(mountPoint) }
        let data = mountPoint + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: false)
        let server = try ServerProcess(
            ["--disk-reserve-bytes", String(4 << 20), "--snapshot-bytes", String(64 << 20), "--history", "2"],
            dataDirectory: data)
        let padding = String(repeating: "x", count: 300)
        func content(_ round: Int) -> [String: Any] {
            ["sections": [["id": "s", "items": (0..<1000).map { ["id": "i\($0)", "data": "\(round)-\(padding)"] }]]]
        }
        var refusal: HTTPResponse?
        for round in 0..<200 {
            let response = try server.client.put("/v1/collections/c", content(round))
            if response.status == 503 {
                refusal = response
                break
            }
            try #require((200..<300).contains(response.status), "\(response.text)")
        }
        #expect(refusal?.errorCode == "insufficient_storage", "the journal never reached the reserve")
        #expect(
            try Self.writesResume(server, "/v1/collections/c/items/after", within: 20), "\(server.log.suffix(2000))")
        #expect(FileManager.default.fileExists(atPath: data + "/snapshot.bin"))
        #expect(server.log.contains("compacting the journal into a snapshot now"))
    }

    /// The free-space reserve on a small tmpfs: writes are refused before the disk is full, snapshots compact
    /// within the reserve, and once room is made writes come back for good.
    @Test func aFullDiskIsRecoveredFrom() throws {
        let mountPoint = try Self.mountTmpfs()
        defer { Self.unmount(mountPoint) }
        let data = mountPoint + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: false)
        let server = try ServerProcess(
            // A short history: the data (which snapshots keep with its history) stays far smaller than the disk.
            ["--disk-reserve-bytes", String(4 << 20), "--snapshot-bytes", String(1 << 20), "--history", "4"],
            dataDirectory: data)
        let filler = mountPoint + "/filler"
        #expect(FileManager.default.createFile(atPath: filler, contents: Data(count: 13 << 20)))
        func content(_ round: Int) -> [String: Any] {
            ["sections": [["id": "s", "items": (0..<4000).map { ["id": "i\($0)", "data": "\(round)-\($0)"] }]]]
        }
        let refused = try server.client.put("/v1/collections/c", content(0))
        #expect(refused.status == 503)
        #expect(refused.errorCode == "insufficient_storage")
        try FileManager.default.removeItem(atPath: filler)
        var failures: [Int: String] = [:]
        for round in 1...120 {
            let response = try server.client.put("/v1/collections/c", content(round))
            if response.status != 200 && response.status != 201 { failures[round] = response.text }
        }
        #expect(failures.isEmpty, "\(failures)\n\(server.log.suffix(3000))")
        let snapshot = try server.client.get("/v1/collections/c").object
        let items = (snapshot["sections"] as? [[String: Any]])?.first?["items"] as? [[String: Any]]
        #expect(items?.last?["data"] as? String == "120-3999")
    }

    /// A start on a disk with no byte free goes on, and takes writes once there is room: what a start writes beside
    /// the journal must not keep it from starting. `last-run` and `journal-head` are rewritten in place.
    @Test func aStartOnADiskWithNoRoomLeftGoesOn() throws {
        let (mountPoint, data) = try Self.smallDisk()
        defer { Self.unmount(mountPoint) }
        var server = try ServerProcess(["--disk-reserve-bytes", "0"], dataDirectory: data)
        #expect(try server.client.put("/v1/collections/c", ["sections": [["id": "s"]]]).status == 201)
        #expect(server.stop() == 0)
        // Fills what is left, byte by byte at the end.
        let filler = mountPoint + "/filler"
        let descriptor = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        try #require(descriptor >= 0)
        let block = [UInt8](repeating: 1, count: 4096)
        for size in [4096, 1] { while write(descriptor, block, size) == size {} }
        close(descriptor)
        server = try ServerProcess(["--disk-reserve-bytes", "0"], dataDirectory: data)
        #expect(!server.log.contains("cannot write"), "\(server.log)")
        let lastRun = try String(contentsOfFile: data + "/last-run", encoding: .utf8)
        #expect(lastRun.contains(" running "), "\(lastRun)")
        #expect(try server.client.get("/v1/collections/c").status == 200)
        try FileManager.default.removeItem(atPath: filler)
        #expect(try Self.writesResume(server, "/v1/collections/c/items/after", within: 10))
    }

    /// Whether a write of `path` (an item not there before) is taken within `seconds`, tried every 100 ms: writes
    /// refused for the disk's reserve come back.
    static func writesResume(_ server: ServerProcess, _ path: String, within seconds: Double) throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try server.client.put(path, ["data": 1]).status == 201 { return true }
            usleep(100_000)
        }
        return false
    }

    /// A tmpfs of `size` (16 MiB by default) on a new temporary directory (mounting needs root, as CI has).
    static func mountTmpfs(size: String = "16m") throws -> String {
        let mountPoint = try ServerProcess.temporaryDirectory()
        let mount = Process()
        mount.executableURL = URL(fileURLWithPath: "/bin/mount")
        mount.arguments = ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", mountPoint]
        try Spawning.run(mount)
        mount.waitUntilExit()
        guard mount.terminationStatus == 0 else {
            rmdir(mountPoint)
            throw ClientError.malformed("mounting a tmpfs needs root")
        }
        return mountPoint
    }

    /// Unmounts what `mountTmpfs` mounted and removes its directory.
    static func unmount(_ mountPoint: String) {
        let unmount = Process()
        unmount.executableURL = URL(fileURLWithPath: "/bin/umount")
        unmount.arguments = [mountPoint]
        try? Spawning.run(unmount)
        unmount.waitUntilExit()
        rmdir(mountPoint)
    }
}
