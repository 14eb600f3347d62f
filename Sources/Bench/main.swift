switch CommandLine.arguments.dropFirst().first {
case "diff": DiffBench.run(filter: CommandLine.arguments.dropFirst(2).first)
case "ops": OpsBench.run()
default: print("usage: Bench diff [name filter] | ops")
}
