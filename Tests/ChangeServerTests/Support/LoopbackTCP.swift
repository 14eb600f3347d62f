import Foundation

/// The machine's IPv4 TCP sockets as `/proc/net/tcp` lists them: for tests that check what a server holds open
/// or has not sent yet. Each line reads `sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt
/// uid timeout inode ...`, addresses as `<hex IP>:<hex port>` (loopback is `0100007F`).
enum LoopbackTCP {
    struct Socket {
        /// 0 for a connection still in its listener's backlog (not accepted yet).
        let inode: String
        let localPort: Int
        let remotePort: Int
        /// The state as the table gives it, in hex: `01` established, `08` close-wait.
        let state: String
        var isEstablished: Bool { state == "01" }
    }

    /// Every socket in the table. One that was reset is no longer listed.
    static func sockets() -> [Socket] {
        String(decoding: table(), as: UTF8.self).split(separator: "\n").dropFirst().compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count > 9, let local = fields[1].split(separator: ":").last.flatMap({ Int($0, radix: 16) }),
                let remote = fields[2].split(separator: ":").last.flatMap({ Int($0, radix: 16) })
            else { return nil }
            return Socket(inode: String(fields[9]), localPort: local, remotePort: remote, state: String(fields[3]))
        }
    }

    /// The sockets by the name their descriptors link to (`socket:[inode]`).
    static func socketsByName() -> [String: Socket] {
        Dictionary(sockets().map { ("socket:[\($0.inode)]", $0) }) { first, _ in first }
    }

    /// Bytes in the send queue (`tx_queue`) of the server's side of a loopback connection. Searched in the table's
    /// bytes rather than split into lines: tests ask many times in a row, and on a busy machine the table has
    /// thousands of lines.
    static func sendQueue(serverPort: Int, clientPort: Int) -> Int? {
        func hex(_ port: Int) -> String {
            let digits = String(port, radix: 16, uppercase: true)
            return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
        }
        let table = table()
        guard let found = table.range(of: Data("0100007F:\(hex(serverPort)) 0100007F:\(hex(clientPort)) ".utf8))
        else { return nil }
        let start = found.upperBound + 3
        guard start + 8 <= table.endIndex else { return nil }
        return Int(String(decoding: table[start..<(start + 8)], as: UTF8.self), radix: 16)
    }

    /// The table, read to the end: /proc files report a size of 0, which `String(contentsOfFile:)` believes.
    private static func table() -> Data {
        FileHandle(forReadingAtPath: "/proc/net/tcp")?.readDataToEndOfFile() ?? Data()
    }
}
