print("usage: Bench <benchmark>")
