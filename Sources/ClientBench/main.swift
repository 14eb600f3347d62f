import ChangeFeedClient
import Foundation
import Model

// The client's benchmarks: `swift run -c release ClientBench [apply|decode|allocations]` (all three without an
// argument). Each reports medians and a baseline measured in the same run.

let arguments = CommandLine.arguments.dropFirst()
switch arguments.first {
case "apply": ApplyBench.run()
case "decode": DecodeBench.run()
case "allocations": AllocationBench.run()
case nil:
    ApplyBench.run()
    DecodeBench.run()
    AllocationBench.run()
default:
    print("usage: ClientBench [apply|decode|allocations]")
    exit(2)
}
