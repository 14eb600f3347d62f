import Testing

@testable import ChangeServer

/// Which sources a start on PostgreSQL snapshots at once after replaying many view definitions
/// (`PostgresJournal.sourcesToSnapshot`).
@Suite struct StartSnapshotChoiceTests {
    /// The sources snapshotted are the fewest that leave the others' definition items below the threshold, those
    /// with the most first, ties by name; none when the whole is below it.
    @Test func theSourcesSnapshottedAfterAStartAreTheFewestThatSuffice() {
        let items = ["a": 6, "b": 3, "c": 3, "d": 1]
        #expect(PostgresJournal.sourcesToSnapshot(items, worth: 14) == [])
        #expect(PostgresJournal.sourcesToSnapshot(items, worth: 13) == ["a"])
        #expect(PostgresJournal.sourcesToSnapshot(items, worth: 8) == ["a"])
        #expect(PostgresJournal.sourcesToSnapshot(items, worth: 7) == ["a", "b"])
        #expect(PostgresJournal.sourcesToSnapshot(items, worth: 1) == ["a", "b", "c", "d"])
        #expect(PostgresJournal.sourcesToSnapshot([:], worth: 1) == [])
    }
}
