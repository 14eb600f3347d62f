import Testing

@testable import ChangeServer

/// A storage error reads in the log as one line of plain text: libpq's messages span lines (`DETAIL`, `HINT`
/// after a tab), which the enum's own description showed escaped (`unavailable(reason: "…\n\t…")`).
@Suite struct InProcessStorageErrorTests {
    @Test func aStorageErrorIsOnePlainLine() {
        let error = StorageError.unavailable(
            reason: "ERROR:  duplicate key value violates unique constraint \"k\"\nDETAIL:\tKey (id)=(1) exists.\n")
        #expect(
            "\(error)" == #"ERROR:  duplicate key value violates unique constraint "k" DETAIL: Key (id)=(1) exists."#)
        #expect(
            "\(StorageError.recordTooLarge(bytes: 5, limit: 4))"
                == "a record of 5 bytes, more than the journal's limit of 4")
    }
}
