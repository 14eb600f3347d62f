import Model

/// The write path: journal the mutation, wait until it is durable, apply it, wake the feed, answer.
extension App {
    /// Journals `record`; applies it and answers at once when the journal says it is durable already
    /// (`--fsync interval` or `never`), otherwise holds the request until the group commit has synced it.
    func submit(
        _ exchange: Exchange, _ record: JournalRecord,
        _ answer: @escaping (Executor.Outcome) -> Response = App.mutationResponse
    ) -> HandlerResult {
        let ticket: UInt64
        do throws(HTTPError) {
            ticket = try journal.write(RecordCodec.encode(record))
        } catch {
            return .respond(.error(error))
        }
        if journal.isDurable(ticket) { return .respond(apply(record, answer)) }
        let held = LoopBound(HeldMutation(exchange: exchange, answer: answer))
        journal.whenDurable(ticket) { [self] durable in
            server.post { [self] in
                let mutation = held.value
                let response: Response
                if durable {
                    response = apply(record, mutation.answer)
                } else {
                    response = .error(HTTPError.storageUnavailable)
                }
                server.answer(mutation.exchange, with: response)
            }
        }
        return .hold
    }

    /// Applies a durable record to the collections, and wakes the polls it concerns.
    private func apply(_ record: JournalRecord, _ answer: (Executor.Outcome) -> Response) -> Response {
        let outcome = executor.execute(record)
        switch outcome {
        case .committed(let entry, _, _):
            metrics.mutationCommitted()
            feed.committed(entry)
        case .deleted(let entry):
            metrics.mutationCommitted()
            feed.deleted(entry)
        case .unchanged, .rejected:
            break
        }
        storage?.committed()
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

/// A mutation waiting for its record's sync: the request to answer and how to answer it.
private final class HeldMutation {
    let exchange: Exchange
    let answer: (Executor.Outcome) -> Response

    init(exchange: Exchange, answer: @escaping (Executor.Outcome) -> Response) {
        self.exchange = exchange
        self.answer = answer
    }
}

extension HTTPError {
    /// The journal could not write or sync: the mutation was not applied.
    static let storageUnavailable = HTTPError(
        .serviceUnavailable, code: "storage_unavailable",
        "The mutation could not be written to disk and was not applied; retry later."
    ).with(header: "Retry-After", "1")
}
