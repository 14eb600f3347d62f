/// Reads whose snapshot takes long to encode are answered off the event loop.
extension App {
    /// Answers a read of `subject` now, or, when it must encode a snapshot that takes long
    /// (`FeedSubject.encodingIsSlow`), on a bulk thread of its own (`BulkThreads.reads`), so that the loop's other
    /// requests do not wait for it: a read of a collection of a million items held `/healthz` on its loop up to
    /// 0.73 s.
    func answerRead(
        of subject: FeedSubject, _ connection: @autoclosure () -> Connection,
        _ read: @escaping @Sendable () -> Response
    ) -> RouteResult {
        guard subject.encodingIsSlow else { return .respond(read()) }
        let connection = connection()
        BulkThreads.reads.run { connection.answer(read()) }
        return .later
    }
}
