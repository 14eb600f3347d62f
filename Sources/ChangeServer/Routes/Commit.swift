import Model
import Synchronization

/// The write path: journal the mutation, wait until it is durable, apply it (in journal order), wake the feeds,
/// answer.
extension App {
    /// Journals `record`. The journal calls back once the record is durable: at once with `--fsync interval`
    /// or `never` (the request is answered right away), or from the group commit's syncer with `always` (the
    /// request is held until then and answered on its worker's loop).
    func submit(
        _ exchange: Exchange, _ worker: Worker, _ record: JournalRecord,
        _ answer: @escaping @Sendable (Executor.Outcome) -> Response = App.mutationResponse
    ) -> HandlerResult {
        let slot = ResponseSlot()
        let held = LoopBound(exchange)
        do throws(HTTPError) {
            try journal.append(RecordCodec.encode(record)) { [self] durable in
                let response = durable ? apply(record, answer) : .error(HTTPError.storageUnavailable)
                if slot.deliverIfWaiting(response) { return }
                worker.post { worker.server.answer(held.value, with: response) }
            }
        } catch {
            return .respond(.error(error))
        }
        if let response = slot.holdUnlessDelivered() { return .respond(response) }
        return .hold
    }

    /// Applies a durable record to the collections, and wakes the polls it concerns on every worker.
    private func apply(_ record: JournalRecord, _ answer: (Executor.Outcome) -> Response) -> Response {
        let outcome = executor.execute(record)
        switch outcome {
        case .committed(let entry, _, _):
            metrics.mutationCommitted()
            onEveryWorker { $0.feed.committed(entry) }
        case .deleted(let entry):
            metrics.mutationCommitted()
            onEveryWorker { $0.feed.deleted(entry) }
        case .unchanged, .rejected:
            break
        }
        storage.committed()
        return answer(outcome)
    }

    /// The answer to a mutation: `{"collection", "version", "changes"}` with its ETag, `204` for a deleted
    /// collection, or the error.
    static func mutationResponse(_ outcome: Executor.Outcome) -> Response {
        switch outcome {
        case .committed(let entry, let changeset, let created):
            return changesetResponse(created ? .created : .ok, entry.name, changeset)
        case .unchanged(let entry, let changeset):
            return changesetResponse(.ok, entry.name, changeset)
        case .deleted:
            return Response(.noContent)
        case .rejected(let error):
            return .error(error)
        }
    }

    private static func changesetResponse(_ status: HTTPStatus, _ name: String, _ changeset: Changeset) -> Response {
        .json(status, headers: [("ETag", Preconditions.etag(changeset.to))]) {
            $0.mutationResult(collection: name, changeset: changeset)
        }
    }
}

/// Where a mutation's response meets its request: filled by the journal's callback, which may come before
/// `submit` returns (then the request is answered at once) or after (then the request is held meanwhile).
private final class ResponseSlot: Sendable {
    private enum State {
        case waiting
        case delivered(Response)
        case held
    }

    private let state = Mutex(State.waiting)

    /// Keeps the response if `submit` has not returned yet; false when the request is held already.
    func deliverIfWaiting(_ response: Response) -> Bool {
        state.withLock { state in
            guard case .waiting = state else { return false }
            state = .delivered(response)
            return true
        }
    }

    /// The response if it came already; otherwise marks the request held.
    func holdUnlessDelivered() -> Response? {
        state.withLock { state in
            if case .delivered(let response) = state { return response }
            state = .held
            return nil
        }
    }
}

extension HTTPError {
    /// The journal could not write or sync: the mutation was not applied.
    static let storageUnavailable = HTTPError(
        .serviceUnavailable, code: "storage_unavailable",
        "The mutation could not be written to disk and was not applied; retry later."
    ).with(header: "Retry-After", "1")
}
