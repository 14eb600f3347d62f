"""The summary of `scripts/bench-isolation.sh`: reads its runs on standard input and prints, per binary, the medians
over the rounds, then what issue 9 sets targets for, round by round: B's throughput while A is replaced against B's
alone (at least 0.5, p99 at most 50 ms), and durable upserts/s spread over 64 collections (40,000, where the issue's
baseline was about 23,000 on one collection: 1.74 times), against each other binary's rate on one collection in the
same round and against the floor."""
import re
import statistics
import sys

TARGET_RATIO = 40_000 / 23_000

runs = {}  # binary -> {"ratio": [...], "p99": [...], "read": [...], "one": [...], "spread": [...]}
order = []
binary = None
section = None
for line in sys.stdin:
    heading = re.match(r"== round \d+: (.+)", line)
    if heading:
        binary = heading.group(1).strip()
        if binary not in runs:
            runs[binary] = {key: [] for key in ("ratio", "p99", "read", "one", "spread")}
            order.append(binary)
        section = None
        read_max = 0.0
        continue
    if binary is None:
        continue
    values = runs[binary]
    if re.match(r"GET .*A replaced", line):
        longest = float(re.search(r"max\s+([\d.]+) ms", line).group(1))
        if section != "replaced":
            values["read"].append(longest)
            section = "replaced"
        else:
            values["read"][-1] = max(values["read"][-1], longest)
    elif line.startswith("while A is replaced back to back"):
        values["p99"].append(float(line.split()[-2]))
    elif line.startswith("throughput ratio"):
        values["ratio"].append(float(line.split()[-1]))
    else:
        writes = re.match(r"\s*64\s+(\d+)\s+(\d+)\s", line)
        if writes:
            values["spread" if writes.group(1) == "64" else "one"].append(int(writes.group(2)))


def median(numbers):
    return statistics.median(numbers) if numbers else None


def shown(number, digits=0):
    if number is None:
        return "-"
    return f"{number:,.{digits}f}"


floor = next((name for name in order if name.startswith("floor")), None)
servers = [name for name in order if name != floor]
print(f"medians over {max((len(runs[name]['spread']) for name in order), default=0)} rounds")
print(f"{'':44} {'B ratio':>8} {'B p99 ms':>9} {'longest read ms':>16} {'one collection':>15} {'spread over 64':>15}")
for name in order:
    values = runs[name]
    print(
        f"{name[-44:]:44} {shown(median(values['ratio']), 2):>8} {shown(median(values['p99']), 2):>9} "
        f"{shown(median(values['read']), 1):>16} {shown(median(values['one'])):>15} {shown(median(values['spread'])):>15}")
print()
for name in servers:
    spread = runs[name]["spread"]
    print(f"{name}: spread over 64, round by round")
    print(f"  {', '.join(shown(rate) for rate in spread)} upserts/s (target 40,000)")
    for other in servers:
        one = runs[other]["one"]
        if not one:
            continue
        ratios = [rate / base for rate, base in zip(spread, one)]
        print(
            f"  times {other}'s rate on one collection: {', '.join(shown(r, 2) for r in ratios)} "
            f"(medians: {shown(median(spread) / median(one), 2)}; the issue's figures: {TARGET_RATIO:.2f})")
    if floor and runs[floor]["spread"]:
        ratios = [rate / base for rate, base in zip(spread, runs[floor]["spread"])]
        print(f"  of the floor: {', '.join(shown(r, 2) for r in ratios)}")
