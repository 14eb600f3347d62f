/// `swift run -c release Bench diff [filter]`: full diffs of the published inputs (median, CPU time, moves
/// against the minimum, peak memory, Swift's own diff as a baseline), plus the whole `replace` path on one.
/// `swift run -c release Bench ops`: single ops applied to a 1,000,000-item collection, and the feed's coalescing.
switch CommandLine.arguments.dropFirst().first {
case "diff": DiffBench.run(filter: CommandLine.arguments.dropFirst(2).first)
case "ops": OpsBench.run()
case "view": ViewBench.run()
case "view-profile":
    ViewBench.profile(
        CommandLine.arguments.dropFirst(2).first ?? "update",
        limit: CommandLine.arguments.dropFirst(3).first.flatMap { Int($0) })
default:
    print(
        "usage: Bench diff [input name filter] | Bench ops | Bench view | Bench view-profile create|redefine|update [limit]"
    )
}
