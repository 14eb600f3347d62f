import Model
import Testing

@testable import ChangeServer

/// A shared response (a snapshot read, or its `304`) is freed once nothing uses it: the mark that shares it holds
/// the response built for it, which kept the mark in turn, and every snapshot read leaked its body twice over.
@Suite struct InProcessResponseShareTests {
    @Test(arguments: [false, true]) func aSharedResponseIsFreedWithItsMark(notModified: Bool) {
        weak var mark: ResponseShare?
        weak var built: SharedResponse?
        weak var builtWithExtra: SharedResponse?
        do {
            let version = Version(epoch: "e", seq: 1)
            let read = Response.snapshot(Array("{}".utf8), at: version)
            let response = notModified ? Response.snapshotNotModified(answering: read) : read
            let share = response.share
            #expect(share != nil)
            let shared = share?.shared(response)
            #expect(shared?.isComplete == true && shared === share?.shared(response))
            _ = shared?.wire
            // With the same extra headers every time (`--cors-origin '*'`), one response is built with them.
            let extra = [(name: "Access-Control-Allow-Origin", value: "*")]
            let withExtra = share?.shared(response, adding: extra)
            #expect(withExtra === share?.shared(response, adding: extra) && withExtra !== shared)
            #expect(share?.shared(response, adding: [(name: "Vary", value: "Origin")]) !== withExtra)
            mark = share
            built = shared
            builtWithExtra = withExtra
        }
        #expect(mark == nil, "the mark outlived every use of it")
        #expect(built == nil, "the response built for the mark outlived it")
        #expect(builtWithExtra == nil, "the response built with extra headers outlived the mark")
    }
}
