#!/usr/bin/env bash
# CrewAI vs crewai-rs on the shared benchmark workload (../shared/bench, README "Workload
# contract"), back to back in one go, and the ratios between them.
#
#   bash bench/compare.sh                      # both sides, REPS=1, ~10 min on 2 cores
#   SIDES=rust bash bench/compare.sh           # Rust only; CrewAI figures from the committed baseline
#   REPS=3 CONCURRENCY="1 10 100 1000" CREWAI_MAX_C=1000 bash bench/compare.sh   # everything (long)
#   SIDES="rust rust-base" BASE_BIN=/path/to/old/crewai-bench SECTIONS=lat0 REPS=5 bash bench/compare.sh
#                                              # a change against an earlier build, side by side
#
# Sections, each with the repetition as the outer loop and the two sides alternating inside it
# (which side goes first flips every repetition):
#   lat0    cold single kickoff + 20 warm kickoffs, through ../shared/bench/run_baseline.sh
#           (process wall and RSS from /usr/bin/time -v, the mock's CPU, the JSON line).
#   lat200  the mock answering after LATENCY_MS; per concurrency C: R = max(LAT_RUNS_MIN,
#           LAT_RUNS_FACTOR * C) kickoffs, plus the mock's own ceiling at C (the recorded CrewAI
#           requests sent raw by `crewai-bench --mock-capacity`, no framework in between).
# Then bench/ratios.py prints the table (also written to $OUT/ratios.md).
#
# Knobs (environment): REPS (1), SIDES ("crewai rust"), LATENCY_MS (200), CONCURRENCY
# ("1 10 100 1000"), CREWAI_MAX_C (100: CrewAI tops out near 12 calls/s, so 2,000 kickoffs at
# C=1000 would take over ten minutes), LAT_RUNS_MIN (10), LAT_RUNS_FACTOR (2), RUN_TIMEOUT
# (900 s per run), PORT0 (18750), VENV (/tmp/crewai-venv), BIN (release crewai-bench, built
# when missing), BASE_BIN (an earlier build of crewai-bench: the side "rust-base", lat0 only),
# LABEL (machine), OUT (bench/results/<date>-<label>), SECTIONS ("lat0 lat200").
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
SHARED="$(cd "$REPO/../shared/bench" && pwd)"
CREWAI_VERSION=1.15.30
REPS="${REPS:-1}"
SIDES="${SIDES:-crewai rust}"
SECTIONS="${SECTIONS:-lat0 lat200}"
LATENCY_MS="${LATENCY_MS:-200}"
CONCURRENCY="${CONCURRENCY:-1 10 100 1000}"
CREWAI_MAX_C="${CREWAI_MAX_C:-100}"
LAT_RUNS_MIN="${LAT_RUNS_MIN:-10}"
LAT_RUNS_FACTOR="${LAT_RUNS_FACTOR:-2}"
RUN_TIMEOUT="${RUN_TIMEOUT:-900}"
PORT0="${PORT0:-18750}"
VENV="${VENV:-/tmp/crewai-venv}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/root/crewai-target}"
BIN="${BIN:-$CARGO_TARGET_DIR/release/crewai-bench}"
LABEL="${LABEL:-$(nproc)cpu-$(uname -m)}"
OUT="${OUT:-$HERE/results/$(date -u +%Y-%m-%d)-$LABEL}"
CONFIG="$SHARED/crewai_py/config"
FIXTURES="$SHARED/fixtures/crewai-${CREWAI_VERSION}_requests.jsonl"
if compgen -G "$OUT/lat*" >/dev/null; then
  echo "$OUT already holds results (runs append); choose another OUT= or LABEL=" >&2; exit 1
fi
mkdir -p "$OUT"
echo "results -> $OUT" >&2

has_side() { [[ " $SIDES " == *" $1 "* ]]; }

# --- the two programs ---------------------------------------------------------------------
if [ ! -x "$BIN" ]; then
  echo "building crewai-bench (release) ..." >&2
  (cd "$REPO" && cargo build --release -p crewai-bench >&2)
fi
if has_side crewai && ! "$VENV/bin/python" -c "import crewai,sys; sys.exit(crewai.__version__ != '$CREWAI_VERSION')" 2>/dev/null; then
  echo "installing crewai==$CREWAI_VERSION into $VENV ..." >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "crewai==$CREWAI_VERSION" >&2
fi
RUST_CMD="$BIN --config $CONFIG"
if has_side rust-base; then
  [ -x "${BASE_BIN:-}" ] || { echo "SIDES has rust-base: set BASE_BIN to an earlier crewai-bench binary" >&2; exit 1; }
  RUST_BASE_CMD="$BASE_BIN --config $CONFIG"
fi
CREWAI_CMD="$VENV/bin/python $SHARED/crewai_py/crew.py"

{
  date -u; uname -a; echo "cpus: $(nproc)"; grep -m1 'model name' /proc/cpuinfo || true
  free -g | sed -n 2p; python3 --version
  has_side crewai && "$VENV/bin/python" -c 'import crewai; print("crewai", crewai.__version__)'
  echo "crewai-bench: $BIN ($(stat -c %s "$BIN") bytes)"; uptime
  has_side rust-base && echo "crewai-bench (base): $BASE_BIN ($(stat -c %s "$BASE_BIN") bytes)"
  echo "REPS=$REPS SIDES='$SIDES' LATENCY_MS=$LATENCY_MS CONCURRENCY='$CONCURRENCY' CREWAI_MAX_C=$CREWAI_MAX_C LAT_RUNS_MIN=$LAT_RUNS_MIN LAT_RUNS_FACTOR=$LAT_RUNS_FACTOR"
} >"$OUT/env.txt" 2>&1

# Sides in the order of repetition $1: alternate who goes first.
ordered_sides() {
  local list=()
  has_side crewai && list+=(crewai)
  has_side rust && list+=(rust)
  has_side rust-base && list+=(rust-base)
  if (( $1 % 2 == 0 )) && (( ${#list[@]} == 2 )); then list=("${list[1]}" "${list[0]}"); fi
  echo "${list[@]}"
}

# --- latency 0: cold + 20 warm kickoffs, via the shared run_baseline.sh ---------------------
if [[ " $SECTIONS " == *" lat0 "* ]]; then
  for rep in $(seq "$REPS"); do
    for side in $(ordered_sides "$rep"); do
      case "$side" in
        crewai) impl=crewai-py; cmd="$CREWAI_CMD" ;;
        rust-base) impl=rust-base; cmd="$RUST_BASE_CMD" ;;
        *) impl=rust; cmd="$RUST_CMD" ;;
      esac
      echo "== lat0 rep $rep: $impl" >&2
      echo "lat0 rep $rep $impl: $(uptime)" >>"$OUT/load.txt"
      IMPL="$impl" CMD="$cmd" PY="$VENV/bin/python" REPS=1 ONLY=cold,seq20 PORT0="$PORT0" \
        OUT="$OUT/lat0-$impl" bash "$SHARED/run_baseline.sh"
    done
  done
fi

# --- latency 200 ms: calls per second at each concurrency, next to the mock's own ceiling ----
MOCK_PID=""
stop_mock() { if [ -n "$MOCK_PID" ]; then kill "$MOCK_PID" 2>/dev/null; wait "$MOCK_PID" 2>/dev/null || true; MOCK_PID=""; fi; }
trap stop_mock EXIT

# run_lat REP IMPL C RUNS CMD...  -> one annotated JSON line appended to $OUT/lat$LATENCY_MS.jsonl
run_lat() {
  local rep="$1" impl="$2" conc="$3" runs="$4"; shift 4
  local js mock_cpu0 mock_cpu1
  echo "== lat$LATENCY_MS rep $rep: $impl C=$conc runs=$runs" >&2
  mock_cpu0=$(proc_cpu_s "$MOCK_PID")
  if ! js=$(timeout "$RUN_TIMEOUT" "$@" --port "$LAT_PORT" --runs "$runs" --concurrency "$conc" \
        --label "c$conc" </dev/null 2>>"$OUT/stderr-lat$LATENCY_MS-$impl.txt" | tail -1) || [ -z "$js" ]; then
    echo "   failed or timed out (see $OUT/stderr-lat$LATENCY_MS-$impl.txt)" >&2
    js='{"failed": true}'
  fi
  mock_cpu1=$(proc_cpu_s "$MOCK_PID")
  # The mock's CPU during the run (a Python server tops out near one core: its GIL) and the
  # machine's load average: what tells a saturated mock or a busy machine from a slow client.
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r.update(section="lat", impl_side=sys.argv[2], rep=int(sys.argv[3]), conc=int(sys.argv[4]), latency_ms=float(sys.argv[5]), mock_cpu_s=round(float(sys.argv[7])-float(sys.argv[6]), 3), loadavg_1m=float(open("/proc/loadavg").read().split()[0])); print(json.dumps(r))' \
    "$js" "$impl" "$rep" "$conc" "$LATENCY_MS" "$mock_cpu0" "$mock_cpu1" | tee -a "$OUT/lat$LATENCY_MS.jsonl" | \
    python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("   calls/s=%s wall=%ss in_flight=%s rss=%sMB mock_cpu=%ss load=%s" % (r.get("llm_calls_per_s"), r.get("total_wall_s"), r.get("mock_max_in_flight"), r.get("peak_rss_mb"), r.get("mock_cpu_s"), r.get("loadavg_1m")), file=sys.stderr)'
}

# User+system CPU seconds of process $1 so far (0 when it is gone).
proc_cpu_s() {
  python3 -c 'import os,sys
try:
    f = open("/proc/%s/stat" % sys.argv[1]).read().rsplit(")", 1)[1].split()
    print((int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK"))
except (OSError, IndexError, ValueError):
    print(0)' "$1"
}

if [[ " $SECTIONS " == *" lat200 "* ]]; then
  LAT_PORT=$((PORT0 + 10))
  python3 "$SHARED/mock_llm.py" --port "$LAT_PORT" --latency-ms "$LATENCY_MS" \
    --log "$OUT/mock-lat$LATENCY_MS.jsonl" >"$OUT/mock-lat$LATENCY_MS.out" 2>&1 &
  MOCK_PID=$!
  for _ in $(seq 50); do grep -q '^PORT' "$OUT/mock-lat$LATENCY_MS.out" 2>/dev/null && break; sleep 0.1; done
  grep -q '^PORT' "$OUT/mock-lat$LATENCY_MS.out" || { echo "mock server did not start" >&2; exit 1; }
  for rep in $(seq "$REPS"); do
    for conc in $CONCURRENCY; do
      runs=$(( conc * LAT_RUNS_FACTOR > LAT_RUNS_MIN ? conc * LAT_RUNS_FACTOR : LAT_RUNS_MIN ))
      run_lat "$rep" mock-capacity "$conc" "$runs" "$BIN" --mock-capacity "$FIXTURES"
      for side in $(ordered_sides "$rep"); do
        if [ "$side" = crewai ]; then
          if (( conc > CREWAI_MAX_C )); then echo "== skip CrewAI at C=$conc (CREWAI_MAX_C=$CREWAI_MAX_C)" >&2; continue; fi
          # shellcheck disable=SC2086
          run_lat "$rep" crewai-py "$conc" "$runs" $CREWAI_CMD
        elif [ "$side" = rust-base ]; then
          continue  # the earlier build is compared on lat0 (cold start, CPU per call) only
        else
          # shellcheck disable=SC2086
          run_lat "$rep" rust "$conc" "$runs" $RUST_CMD
        fi
      done
    done
  done
  stop_mock
fi

echo "end: $(uptime)" >>"$OUT/load.txt"
python3 "$HERE/ratios.py" "$OUT" --baseline "$SHARED/results/crewai-${CREWAI_VERSION}/results.jsonl" | tee "$OUT/ratios.md"
# The per-request log of the latency runs is large and only kept for inspection.
[ -f "$OUT/mock-lat$LATENCY_MS.jsonl" ] && gzip -f "$OUT/mock-lat$LATENCY_MS.jsonl"
true
