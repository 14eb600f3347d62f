import Model
import Synchronization
import Testing

@testable import ChangeServer

/// The order in which a server applies the records of one collection on a shared database: its own records
/// (registered by a transaction, then committed) and those of other servers (read by the follower, often late,
/// sometimes twice) come out in sequence order, each exactly once, whatever the interleaving.
@Suite struct InProcessSequencedDeliveryTests {
    /// What came out: the sequence of each record handed on, and whether it was this server's own; other
    /// servers' records handed on with a size other than their encoded one.
    private final class Output: Sendable {
        let handed = Mutex<[(seq: Int64, local: Bool)]>([])
        let failed = Mutex<[Int64]>([])
        let wrongSizes = Mutex(0)
    }

    private static func record(_ seq: Int64, from server: String = "") -> [UInt8] {
        RecordCodec.encode(
            .upsert(
                collection: "c", id: "i\(seq)\(server)", data: JSONData(canonical: Array("1".utf8)), section: nil,
                index: nil, conditions: .none))
    }

    private static func delivery(_ output: Output) -> SequencedDelivery {
        let delivery = SequencedDelivery(applied: [:], logger: Logger(level: .critical))
        delivery.start { record, bytes in
            if bytes != RecordCodec.encode(record).count { output.wrongSizes.withLock { $0 += 1 } }
            guard case .upsert(_, let id, _, _, _, _, _) = record,
                let seq = id.dropFirst().split(separator: "-").first.flatMap({ Int64($0) })
            else { return }
            output.handed.withLock { $0.append((seq, false)) }
        }
        return delivery
    }

    private static func local(_ seq: Int64, _ output: Output) -> SequencedDelivery.Local {
        SequencedDelivery.Local(record: record(seq)) { durable in
            if durable {
                output.handed.withLock { $0.append((seq, true)) }
            } else {
                output.failed.withLock { $0.append(seq) }
            }
        }
    }

    /// 300 records, each this server's or another's, committed in order in the "database"; this server's commit
    /// calls come late, the follower reads from a stale position: all come out once, in order.
    @Test(arguments: 0..<30)
    func ownAndOtherRecordsInterleaveInSequenceOrder(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let output = Output()
        let delivery = Self.delivery(output)
        let count: Int64 = 300
        let isLocal = (0...count).map { _ in Bool.random(using: &random) }
        var committedInDatabase: Int64 = 0
        var awaitingCommitCall: [(first: Int64, count: Int)] = []
        var steps = 0
        while output.handed.withLock({ $0.count }) < Int(count) || !awaitingCommitCall.isEmpty {
            steps += 1
            precondition(steps < 100_000, "the simulation does not end")
            switch Int.random(in: 0..<3, using: &random) {
            case 0 where committedInDatabase < count:
                // The next transaction commits in the database: this server's run of records, or one other's.
                let first = committedInDatabase + 1
                var last = first
                if isLocal[Int(first)] {
                    while last < count && isLocal[Int(last + 1)] && Bool.random(using: &random) { last += 1 }
                    delivery.register("c", first: first, (first...last).map { Self.local($0, output) })
                    awaitingCommitCall.append((first, Int(last - first + 1)))
                }
                committedInDatabase = last
            case 1 where !awaitingCommitCall.isEmpty:
                let index = Int.random(in: 0..<awaitingCommitCall.count, using: &random)
                let call = awaitingCommitCall.remove(at: index)
                _ = delivery.committed("c", first: call.first, count: call.count)
            default:
                // The follower reads what is committed after a position that may be stale.
                let applied = delivery.applied("c")
                let from = max(0, applied - Int64.random(in: 0...3, using: &random))
                guard from < committedInDatabase else { continue }
                let rows = ((from + 1)...committedInDatabase).map {
                    (seq: $0, record: Self.record($0), id: Int64?.none)
                }
                let (failed, gap) = delivery.offer("c", rows)
                #expect(failed.isEmpty)
                #expect(!gap)
            }
        }
        let handed = output.handed.withLock { $0 }
        #expect(handed.map(\.seq) == Array(1...count))
        for entry in handed { #expect(entry.local == isLocal[Int(entry.seq)], "record \(entry.seq)") }
        #expect(output.failed.withLock { $0 }.isEmpty)
        #expect(output.wrongSizes.withLock { $0 } == 0, "a remote record is handed on with its encoded size")
        #expect(delivery.applied("c") == count)
    }

    /// A transaction of this server that failed leaves its sequence to another server's record: the follower's
    /// row with other bytes tells the waiting record it is not durable, and the other record is applied.
    @Test func anotherRecordAtAHeldSequenceFailsTheOwnOne() {
        let output = Output()
        let delivery = Self.delivery(output)
        delivery.register("c", first: 1, [Self.local(1, output)])
        let (failed, _) = delivery.offer("c", [(1, Self.record(1, from: "-other"), nil)])
        #expect(failed.count == 1)
        #expect(output.handed.withLock { $0.count } == 1)
        #expect(output.handed.withLock { $0.first?.local } == false)
        #expect(delivery.abandon("c", first: 1, count: 1).isEmpty)
    }

    /// A failed transaction's records are returned by `abandon` and hold nothing up; a row seen by the follower
    /// proves a commit whose answer was lost (`abandon` leaves it), but the record is handed on only when the writer
    /// releases it (`committed`), in the order it keeps among its batches.
    @Test func abandonedAndProvenRecords() {
        let output = Output()
        let delivery = Self.delivery(output)
        delivery.register("c", first: 1, [Self.local(1, output), Self.local(2, output)])
        #expect(delivery.abandon("c", first: 1, count: 2).count == 2)
        #expect(delivery.applied("c") == 0)
        delivery.register("c", first: 1, [Self.local(1, output)])
        _ = delivery.offer("c", [(1, Self.record(1), nil)])
        #expect(output.handed.withLock { $0.isEmpty }, "handed on by the follower's read, before the writer's turn")
        #expect(delivery.lastCommitted("c") == 1)
        #expect(delivery.abandon("c", first: 1, count: 1).isEmpty)
        _ = delivery.committed("c", first: 1, count: 1)
        #expect(output.handed.withLock { $0.map(\.local) } == [true])
        #expect(delivery.offer("c", [(1, Self.record(1), nil)]).failed.isEmpty)
        #expect(output.handed.withLock { $0.count } == 1, "a record handed on twice")
    }

    /// A transaction known rolled back drops its record even when the follower read the same bytes at its
    /// sequence (another server's identical record took it): nothing is left to hold the collection up, and that
    /// record, read again, is applied as the other server's.
    @Test func aRolledBackRecordIsDroppedEvenWhenItsBytesWereRead() {
        let output = Output()
        let delivery = Self.delivery(output)
        delivery.register("c", first: 1, [Self.local(1, output)])
        _ = delivery.offer("c", [(1, Self.record(1), nil)])
        #expect(delivery.abandon("c", first: 1, count: 1).isEmpty, "seen: kept for the writer")
        #expect(delivery.abandon("c", first: 1, count: 1, rolledBack: true).count == 1)
        _ = delivery.offer("c", [(1, Self.record(1), nil), (2, Self.record(2), nil)])
        #expect(output.handed.withLock { $0.map(\.seq) } == [1, 2])
        #expect(output.handed.withLock { $0.map(\.local) } == [false, false])
    }

    /// Rows that start past the next sequence, with nothing held in between, are a gap (compacted records).
    @Test func rowsPastAGapAreReported() {
        let output = Output()
        let delivery = Self.delivery(output)
        #expect(delivery.offer("c", [(5, Self.record(5), nil)]).gap)
        #expect(delivery.applied("c") == 0)
        #expect(output.handed.withLock { $0.isEmpty })
    }

    /// The follower reads on after what is here in order (`readThrough`): this server's records it saw, and those of
    /// others held behind them, but not one of this server's still pending. Rows that start right after that are no
    /// gap; rows past a missing sequence are.
    @Test func theFollowerReadsOnAfterWhatIsHereInOrder() {
        let output = Output()
        let delivery = Self.delivery(output)
        delivery.register("c", first: 1, [Self.local(1, output), Self.local(2, output)])
        #expect(delivery.readThrough("c") == 0, "records of this server not known committed are not read")
        let rows = [(Int64(1), Self.record(1)), (2, Self.record(2)), (3, Self.record(3, from: "-other"))]
        let offered = delivery.offer("c", rows.map { (seq: $0.0, record: $0.1, id: Int64?.none) })
        #expect(!offered.gap)
        #expect(delivery.applied("c") == 0)
        #expect(delivery.readThrough("c") == 3)
        #expect(!delivery.offer("c", [(4, Self.record(4, from: "-other"), nil)]).gap)
        #expect(delivery.readThrough("c") == 4)
        #expect(delivery.offer("c", [(6, Self.record(6, from: "-other"), nil)]).gap)
        #expect(delivery.committed("c", first: 1, count: 2), "record 6 waits for 5")
        #expect(output.handed.withLock { $0.map(\.seq) } == [1, 2, 3, 4])
        #expect(delivery.readThrough("c") == 4)
    }

    /// A move of this server holds back the records of the source it leaves past where it locked it (`c` past 1),
    /// until the move's batch is handed on itself, which waits for another server's record before it (`d` 1):
    /// records committed after the move come out after it, and those read before it are known held until then.
    @Test func recordsPastABarrierWaitForTheBatchThatSetIt() {
        let output = Output()
        let delivery = Self.delivery(output)
        #expect(delivery.offer("c", [(1, Self.record(1), 10)]).failed.isEmpty)
        delivery.register("d", first: 2, [Self.local(100, output)])
        let barrier = delivery.hold(["c": 1])
        _ = delivery.offer("c", [(2, Self.record(2), 13), (3, Self.record(3), 14)])
        #expect(output.handed.withLock { $0.map(\.seq) } == [1])
        #expect(delivery.holdsBefore(14) && !delivery.holdsBefore(13), "c 2 (id 13) is held, and known to be")
        #expect(delivery.committed("d", first: 2, count: 1), "d 2 waits for d 1")
        delivery.release(barrier, after: ["d": 2])
        #expect(output.handed.withLock { $0.map(\.seq) } == [1], "the batch is not handed on yet")
        _ = delivery.offer("d", [(1, Self.record(50), 11)])
        #expect(output.handed.withLock { $0.map(\.seq) } == [1, 50, 100, 2, 3])
        #expect(!delivery.holdsBefore(.max))
    }

    /// A batch of this server that follows another server's move (`d` 1) holds its own records back (`c` past 1)
    /// until that move is handed on, not only read: a read that holds it behind a gap does not let them go.
    @Test func ownRecordsHeldUntilWhatTheyFollowIsHandedOn() {
        let output = Output()
        let delivery = Self.delivery(output)
        delivery.register("c", first: 2, [Self.local(100, output)])
        let wait = delivery.hold(["c": 1], until: ["d": 2])
        _ = delivery.offer("c", [(1, Self.record(1), 5)])
        _ = delivery.committed("c", first: 2, count: 1)
        _ = delivery.offer("d", [(2, Self.record(52), 12)])
        #expect(output.handed.withLock { $0.map(\.seq) } == [1], "d 2 is read but held behind d 1")
        _ = delivery.offer("d", [(1, Self.record(51), 11)])
        #expect(output.handed.withLock { $0.map(\.seq) } == [1, 51, 52, 100])
        delivery.release(wait)
        #expect(output.handed.withLock { $0.count } == 4)
    }

    /// A view's record the follower read and holds (behind this server's own record, committed and not released
    /// yet) is known held by its id, as that own record is: records after it wait for it; once handed on, nothing
    /// is held.
    @Test func aHeldViewRecordIsKnownHeldByItsID() {
        let output = Output()
        let delivery = Self.delivery(output)
        delivery.register("d", first: 1, [Self.local(100, output)])
        let definition = JSONData(canonical: Array(#"{"source":"d"}"#.utf8))
        let move = RecordCodec.encode(.defineView(view: "v", epoch: "e", definition: definition, conditions: .none))
        _ = delivery.offer("d", [(1, Self.record(100), 5), (2, move, 7)])
        #expect(delivery.holdsBefore(7), "the own record, id 5")
        #expect(delivery.holdsViewRecordBefore(8) && !delivery.holdsViewRecordBefore(7))
        _ = delivery.committed("d", first: 1, count: 1)
        #expect(output.handed.withLock { $0.map(\.seq) } == [100])
        #expect(!delivery.holdsBefore(.max) && !delivery.holdsViewRecordBefore(.max))
    }

    /// A barrier released with nothing to wait for (its batch failed) lets what it held back go at once; another
    /// barrier on the same collection still holds what lies past its own bound.
    @Test func aBarrierReleasedAtOnceHoldsNothingBack() {
        let output = Output()
        let delivery = Self.delivery(output)
        let first = delivery.hold(["c": 0])
        let second = delivery.hold(["c": 1])
        _ = delivery.offer("c", [(1, Self.record(1), 1), (2, Self.record(2), 2)])
        #expect(output.handed.withLock { $0.isEmpty })
        delivery.release(first)
        #expect(output.handed.withLock { $0.map(\.seq) } == [1])
        delivery.release(second)
        #expect(output.handed.withLock { $0.map(\.seq) } == [1, 2])
    }

    /// A shared journal orders a view's records with its source's: a definition under its (new) source, a deletion
    /// under the source the view has, and under `view:<name>` when that is unknown.
    @Test func viewRecordsAreSequencedWithTheirSource() throws {
        let sources = ["board": "tasks"]
        let key = { (record: JournalRecord) in
            RecordCodec.sequenceKey(of: RecordCodec.encode(record), viewSource: { sources[$0] })
        }
        #expect(key(.delete(collection: "tasks", conditions: .none)) == "tasks")
        let definition = JSONData(canonical: Array(#"{"source":"other"}"#.utf8))
        #expect(key(.defineView(view: "board", epoch: "e", definition: definition, conditions: .none)) == "other")
        #expect(key(.deleteView(view: "board", conditions: .none)) == "tasks")
        #expect(key(.deleteView(view: "gone", conditions: .none)) == "view:gone")
        #expect(RecordCodec.sequenceKey(of: [0xFF], viewSource: { sources[$0] }) == nil)
    }
}
