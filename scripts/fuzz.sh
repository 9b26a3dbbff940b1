#!/usr/bin/env bash
# Runs each fuzz target under fuzz/ for a bounded time, one after the other.
#
#   scripts/fuzz.sh                      # every target, FUZZ_SECONDS (default 600) each
#   FUZZ_SECONDS=60 scripts/fuzz.sh sse_stream react_parser
#
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz --locked`). The corpus
# grows in fuzz/corpus/<target>/ (seeded from fuzz/seeds/<target>/), crashes land in
# fuzz/artifacts/<target>/ and each run's log in fuzz/logs/<target>.log. Exits non-zero when a
# target found a crash. Settings: FUZZ_SECONDS, FUZZ_RSS_LIMIT_MB (2048), FUZZ_MAX_LEN (8192),
# FUZZ_TOOLCHAIN (nightly), CARGO_TARGET_DIR (default: fuzz/target).
set -euo pipefail

cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-600}"
rss_limit="${FUZZ_RSS_LIMIT_MB:-2048}"
max_len="${FUZZ_MAX_LEN:-8192}"
toolchain="${FUZZ_TOOLCHAIN:-nightly}"

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo "+$toolchain" fuzz list)
fi

# Debug assertions on: an integer overflow is a finding too.
cargo "+$toolchain" fuzz build --debug-assertions

mkdir -p fuzz/logs
failed=()
for target in "${targets[@]}"; do
    corpus="fuzz/corpus/$target"
    mkdir -p "$corpus" "fuzz/artifacts/$target"
    seeds=()
    if [ -d "fuzz/seeds/$target" ]; then
        seeds=("fuzz/seeds/$target")
    fi
    echo "== $target: ${seconds}s (log: fuzz/logs/$target.log)"
    if cargo "+$toolchain" fuzz run --debug-assertions "$target" "$corpus" "${seeds[@]}" -- \
        -max_total_time="$seconds" -rss_limit_mb="$rss_limit" -max_len="$max_len" \
        -timeout=10 -print_final_stats=1 \
        >"fuzz/logs/$target.log" 2>&1; then
        grep -E 'DONE |^Done ' "fuzz/logs/$target.log" || true
    else
        echo "!! $target failed; see fuzz/logs/$target.log and fuzz/artifacts/$target/"
        tail -n 30 "fuzz/logs/$target.log"
        failed+=("$target")
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "crashes in: ${failed[*]}"
    exit 1
fi
echo "no crash in: ${targets[*]}"
