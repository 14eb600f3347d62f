import Foundation
import ProcessSupport
import Testing

/// The test support's own deadlines: a server that never says it listens cannot hold a test.
@Suite struct ServerProcessTests {
    @Test(.timeLimit(.minutes(1))) func startDeadlineHoldsAgainstASilentServer() throws {
        let silent = Pipe()
        let (port, text) = ServerProcess.readListeningPort(silent.fileHandleForReading, within: 0.3)
        #expect(port == nil && text.isEmpty)
        silent.fileHandleForWriting.write(Data("starting\nlistening on 127.0.0.1:4321\n".utf8))
        let (found, _) = ServerProcess.readListeningPort(silent.fileHandleForReading, within: 5)
        #expect(found == 4321)
    }
}
