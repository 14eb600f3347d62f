import Dispatch
import Foundation
import Model
import Testing

@testable import ChangeServer

/// `Lanes`: work for one name runs in the order handed in and never two at a time; work for several names runs once
/// all their lanes reached it, alone on each of them.
@Suite struct InProcessLanesTests {
    @Test(arguments: 0..<5)
    func everyLaneSeesItsWorkInOrderAndAlone(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let names = ["a", "b", "c", "d", "e"]
        let pieces: [Set<String>] = (0..<2000).map { _ in
            let count = Int.random(in: 0..<10, using: &random) == 0 ? Int.random(in: 2...3, using: &random) : 1
            return Set((0..<count).map { _ in names[Int.random(in: 0..<names.count, using: &random)] })
        }
        let lanes = Lanes()
        let log = LaneLog()
        let group = DispatchGroup()
        for (index, piece) in pieces.enumerated() {
            group.enter()
            let work: @Sendable () -> Void = {
                log.begin(index, piece)
                log.end(piece)
                group.leave()
            }
            if piece.count == 1, let name = piece.first { lanes.run(name, work) } else { lanes.run(piece, work) }
        }
        #expect(group.wait(timeout: .now() + 30) == .success, "seed \(seed)")
        #expect(log.overlaps == 0, "seed \(seed): work ran on a lane that was busy")
        for name in names {
            let expected = pieces.indices.filter { pieces[$0].contains(name) }
            #expect(log.order[name] ?? [] == expected, "seed \(seed), lane \(name)")
        }
        #expect(pieces.filter { $0.count > 1 }.count > 100)
    }
}

private final class LaneLog: @unchecked Sendable {
    // @unchecked: everything is guarded by `lock`.
    private let lock = NSLock()
    private var busy = Set<String>()
    private(set) var order: [String: [Int]] = [:]
    private(set) var overlaps = 0

    func begin(_ index: Int, _ names: Set<String>) {
        lock.withLock {
            for name in names {
                if !busy.insert(name).inserted { overlaps += 1 }
                order[name, default: []].append(index)
            }
        }
        usleep(UInt32.random(in: 0..<20))
    }

    func end(_ names: Set<String>) {
        lock.withLock { busy.subtract(names) }
    }
}
