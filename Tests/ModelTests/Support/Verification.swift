import ChangesetChecks
import Testing

@testable import Model

/// Checks a changeset against `docs/changesets.md`: UIKit accepts it and it takes `old` to `new` (rules 1, 2, 3
/// and 5), and its moves are minimal (rule 4). Failures name `context`, which carries the seed.
func verify(_ changeset: Changeset, from old: [Section], to new: [Section], _ context: String) {
    do {
        let result = try UIKitBatch.apply(changeset, to: old)
        #expect(result == new, "\(context): the changeset does not reproduce the new state\n\(changeset)")
    } catch {
        Issue.record("\(context): UIKit rejects the changeset: \(error)\nold \(old)\nnew \(new)\n\(changeset)")
    }
    if let mismatch = MinimalMoves.mismatch(changeset, old: old, new: new) {
        Issue.record("\(context): \(mismatch)\nold \(old)\nnew \(new)\n\(changeset)")
    }
}
