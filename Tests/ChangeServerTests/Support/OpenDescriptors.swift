import Foundation

/// The descriptors a server process has open, read from `/proc`: for tests that check a server leaves nothing
/// behind.
///
/// The suite runs many servers and clients at once on loopback, each server on a port the kernel chose. A client of
/// another test that reconnects to a port whose server is gone can reach a server that has just been given that
/// port: `foreignConnections` tells such connections apart, so that they do not pass for a leak.
struct OpenDescriptors {
    /// What each descriptor names, by number: `socket:[inode]`, a path, `anon_inode:[eventpoll]`.
    let targets: [Int: String]

    init(of pid: Int32) {
        let directory = "/proc/\(pid)/fd"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        var targets: [Int: String] = [:]
        for name in names {
            guard let number = Int(name) else { continue }
            let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\(name)")) ?? "?"
            // libdispatch opens one timerfd per clock the first time a timer of that clock is armed, at a moment
            // no test controls (a CI run on a loaded machine saw one appear mid-test); the server opens none itself.
            if target == "anon_inode:[timerfd]" { continue }
            targets[number] = target
        }
        self.targets = targets
    }

    var count: Int { targets.count }

    /// Descriptors that are connections a client outside the test holds open to the server on `port`: established
    /// (a connection of the test's own that leaked has been closed by its client, and is not) and from a port not
    /// in `ownPorts`.
    func foreignConnections(on port: Int, ownPorts: Set<Int>) -> Int {
        let sockets = LoopbackTCP.socketsByName()
        return targets.values.count { target in
            guard let socket = sockets[target] else { return false }
            return socket.localPort == port && socket.isEstablished && !ownPorts.contains(socket.remotePort)
        }
    }

    /// The descriptors open now that were not open in `earlier`, each with what it names and, for a TCP socket,
    /// its ports and state: what a failed check prints.
    func added(since earlier: OpenDescriptors) -> String {
        let sockets = LoopbackTCP.socketsByName()
        return targets.filter { earlier.targets[$0.key] != $0.value }.sorted { $0.key < $1.key }.map {
            number, target in
            guard let socket = sockets[target] else { return "\(number) → \(target)" }
            return "\(number) → \(target) \(socket.localPort)←\(socket.remotePort) state \(socket.state)"
        }.joined(separator: ", ")
    }
}
