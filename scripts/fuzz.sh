#!/usr/bin/env bash
# Fuzzes the request path (Fuzz/RequestFuzz.swift) with libFuzzer and AddressSanitizer for a bounded time.
#   scripts/fuzz.sh [SECONDS]     default 60; the corpus grows in .build/fuzz/corpus, seeded from Fuzz/corpus
# The ChangeServer executable target cannot be linked into another target, so its sources (without main.swift)
# are compiled here together with the harness; Model is compiled first as a module of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
out=.build/fuzz
mkdir -p "$out/corpus"
flags=(-sanitize=fuzzer,address -parse-as-library -O -g -swift-version 6 -package-name ChangeServer)
mapfile -t model < <(find Sources/Model -name '*.swift' | sort)
mapfile -t server < <(find Sources/ChangeServer -name '*.swift' ! -name main.swift | sort)
nice -n 5 swiftc "${flags[@]}" -module-name Model -emit-module -emit-module-path "$out/Model.swiftmodule" \
    -emit-library -static -o "$out/libModel.a" "${model[@]}"
# The C modules (Sources/C*/module.modulemap) and the system libraries Package.swift names for them.
modules=()
for map in Sources/C*/module.modulemap; do modules+=(-Xcc "-fmodule-map-file=$map"); done
mapfile -t libraries < <(sed -n 's/.*pkgConfig: "\([^"]*\)".*/\1/p' Package.swift)
nice -n 5 swiftc "${flags[@]}" -module-name ChangeServer -I "$out" -L "$out" -lModel "${modules[@]}" \
    $(pkg-config --cflags-only-I "${libraries[@]}" | sed 's/-I/-Xcc -I/g') $(pkg-config --libs "${libraries[@]}") \
    -o "$out/fuzz-request" "${server[@]}" Fuzz/RequestFuzz.swift
# Leaks are reported by the server's own tests; libFuzzer's leak check would flag the app kept for all inputs.
data="$(mktemp -d)"
trap 'rm -rf "$data"' EXIT
FUZZ_DATA_DIR="$data" ASAN_OPTIONS=detect_leaks=0 nice -n 5 "$out/fuzz-request" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=4096 -max_len=4096 "$out/corpus" Fuzz/corpus
