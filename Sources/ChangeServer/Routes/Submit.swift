import Model

/// The route side of the write path: turn a request into a journal record, hand it to the `Committer`, and answer
/// once it took effect. Bodies larger than `largeBodyBytes` are decoded on the collection's lane, as bulk work, not
/// on the event loop that received them.
extension App {
    /// Bodies from this size on are decoded off the event loop.
    static let largeBodyBytes = 64 * 1024

    /// Decodes the request into a record (on the loop for a small body, on the collection's lane for a large one),
    /// submits it, and answers the connection with `answer` once the record took effect.
    func submit(
        _ request: Request, _ name: String, _ connection: Connection,
        decode: @escaping @Sendable (Request) throws(HTTPError) -> JournalRecord,
        answer: @escaping @Sendable (Committer.Result) -> Response = App.mutationResponse
    ) throws(HTTPError) -> RouteResult {
        guard request.body.count >= Self.largeBodyBytes else {
            let record = try decode(request)
            try checkDiskSpace(passing: record.onlyDeletes)
            try submit(record, connection, answer: answer)
            return .later
        }
        // A body this large is no small deletion (a `DELETE`'s body is not read): below the reserve it is refused
        // before it is decoded.
        try checkDiskSpace(passing: request.method == "DELETE")
        committer.onLane(of: name, bulk: true) { [self] in
            // A stopping server answered it 503 while it waited here: decoding it would only hold up the lane.
            guard !connection.isAbandoned else { return }
            let record: JournalRecord
            do throws(HTTPError) {
                record = try decode(request)
            } catch {
                return connection.answer(.error(error))
            }
            // Encoded here, journaled at normal priority in the lane's turn: the journal's locks are not to be held
            // by a bulk thread (with `--fsync interval` and `never`, the record is written under them).
            let encoded = RecordCodec.encode(record)
            committer.onLane(of: name) { [self] in
                do throws(HTTPError) {
                    try submit(record, encoded: encoded, connection, answer: answer)
                } catch {
                    connection.answer(.error(error))
                }
            }
        }
        return .later
    }

    /// Below the free-space reserve, writes are refused `503`, so that the journal leaves the reserve to snapshots,
    /// which compact it. Deletions in a body under `largeBodyBytes` pass (`deletion`, `JournalRecord.onlyDeletes`):
    /// their records are small, and they let a client make room, which the snapshot they start, as refused writes
    /// do (`Committer.compactForSpace`: at most one every 10 s), then frees.
    private func checkDiskSpace(passing deletion: Bool = false) throws(HTTPError) {
        guard let diskSpace, !diskSpace.allowsWrites else { return }
        committer.compactForSpace()
        if deletion { return }
        metrics.writeRefusedForDisk()
        throw .insufficientStorage(free: diskSpace.freeBytes ?? 0, reserve: diskSpace.reserve)
    }

    /// `encoded`: the record's journal bytes, when they were made already.
    private func submit(
        _ record: JournalRecord, encoded: [UInt8]? = nil, _ connection: Connection,
        answer: @escaping @Sendable (Committer.Result) -> Response
    ) throws(HTTPError) {
        // A stopping server answered this request 503 already (its body was still being decoded on the lane).
        guard connection.claimCommit() else { return }
        do throws(StorageError) {
            try committer.submit(record, encoded: encoded) { result in connection.answer(answer(result)) }
        } catch {
            throw HTTPError(error)
        }
    }

    /// The request's `If-Match` and `If-None-Match`, checked when its record is applied; `400` at once for one
    /// that is neither `*` nor a list of versions (`EntityTags.namesVersions`), and `412` for an `If-Match` of weak
    /// tags only, or empty, which can never match.
    static func conditions(_ request: Request) throws(HTTPError) -> JournalRecord.Conditions {
        let ifMatch = request.listHeader("If-Match")
        let ifNoneMatch = request.listHeader("If-None-Match")
        if let ifMatch, !ifMatch.allSatisfy({ $0 == " " || $0 == "\t" || $0 == "," }),
            !EntityTags.namesVersions(ifMatch)
        {
            throw .malformedCondition("If-Match")
        }
        if let ifNoneMatch, !EntityTags.namesVersions(ifNoneMatch) { throw .malformedCondition("If-None-Match") }
        guard let conditions = JournalRecord.Conditions.from(ifMatch: ifMatch, ifNoneMatch: ifNoneMatch) else {
            throw .weakIfMatch
        }
        return conditions
    }

    /// The answer to a mutation: `{"collection", "version", "changes"}` with its ETag, `204` for a deleted
    /// collection, or the error.
    static func mutationResponse(_ result: Committer.Result) -> Response {
        switch result {
        case .committed(let entry, let changes, let created):
            return changesetResponse(created ? .created : .ok, entry, changes)
        case .unchanged(let entry, let changes):
            return changesetResponse(.ok, entry, changes)
        case .deleted, .viewDeleted:
            return Response(.noContent)
        case .viewDefined(let entry, let changes, let created):
            return changesetResponse(created ? .created : .ok, entry, changes)
        case .rejected(let rejection):
            return .error(HTTPError(rejection))
        case .notDurable:
            return .error(.storageUnavailable)
        }
    }

    private static func changesetResponse(_ status: HTTPStatus, _ subject: FeedSubject, _ changes: EncodedChangeset)
        -> Response
    {
        .json(status, headers: changesetHeaders(changes.changeset.to)) {
            $0.mutationResult(subject.kind, name: subject.name, changes: changes)
        }
    }

    private static func changesetHeaders(_ version: Version) -> [(name: String, value: String)] {
        [("ETag", EntityTags.quoted(version))]
    }

    /// The header lines of the longest answer a committed write gets (`Content-Type` and the `ETag` of a version
    /// with the longest epoch and sequence). A write is refused `431` before it is submitted when these would not
    /// fit in the connection's memory next to its request's headers: once committed, its answer cannot be
    /// replaced by a refusal (the client would take the write for not done, and repeat it).
    static let committedAnswerHeaderBytes = SharedResponse.headerBytes(
        of: [("Content-Type", Response.jsonContentType)]
            + changesetHeaders(Version(epoch: String(repeating: "e", count: Version.longestEpoch), seq: .max)))
}
