import Foundation
import ProcessSupport
import Testing

/// Memory a server freed goes back to the system (`MemoryTrimmer`).
extension LiveHardeningTests {
    /// glibc's allocator keeps what a server freed for later use: three collections of 150,000 items written and
    /// deleted left it some 150 MB resident above where it started, which in a container counts against its
    /// memory limit for good. It gives the freed memory back within a period of the trimmer (10 s) or two, to some
    /// 30 MB above where it started (trims while the collections were written may have kept the peak lower).
    @Test func memoryFreedByDeletedCollectionsGoesBackToTheSystem() throws {
        let server = try ServerProcess()
        let resident = { try server.metric("process_resident_memory_bytes") ?? 0 }
        let start = try resident()
        #expect(start > 0, "process_resident_memory_bytes is not served")
        let names = ["a", "b", "c"]
        for name in names {
            let items = (0..<150_000).map { ["id": "\(name)\($0)", "data": ["n": $0, "t": "twenty bytes of text"]] }
            #expect(
                try server.client.put("/v1/collections/\(name)", ["sections": [["id": "s", "items": items]]]).status
                    == 201)
        }
        let peak = try resident()
        #expect(peak - start > 96_000_000, "three collections of 150,000 items took \(peak - start) bytes")
        for name in names {
            #expect(try server.client.request("DELETE", "/v1/collections/\(name)").status == 204)
        }
        let target = start + 48_000_000
        let gaveBack = try waitUntil(timeout: 40) { try resident() < target }
        let end = try resident()
        #expect(
            gaveBack, "resident \(end) bytes, \(start) at the start and \(peak) at the peak\n\(server.log.suffix(2000))"
        )
        #expect(server.log.contains("of freed memory back to the system"), "\(server.log.suffix(2000))")
    }
}
