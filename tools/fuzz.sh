#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every libFuzzer target (tests/fuzz, docs/fuzzing.md) for SECONDS each, one after another on
# one core, and reports per target: executions, coverage at start and end, new corpus inputs.
# Exits non-zero when any target crashed, hung, leaked or broke an invariant; the input that did it
# is left in $FUZZ_WORK/<target>/ (crash-*, timeout-*, leak-*, oom-*).
#
#   tools/fuzz.sh [SECONDS]            default 60 s per target
#   FUZZ_BUILD=build-fuzz              build folder configured with -DTIEBREAK_BUILD_FUZZERS=ON
#   FUZZ_TARGETS="npy safetensors"     subset (default: every target)
#   FUZZ_WORK=$FUZZ_BUILD/fuzz-work    where the growing corpora, logs and crash files go
#
# The committed seeds (tests/fuzz/corpus/<target>) are read, never written: new inputs go to the
# working corpus. Build first: cmake --build build-fuzz -j1 --target tiebreak_fuzzers
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-60}"
build="${FUZZ_BUILD:-$root/build-fuzz}"
work="${FUZZ_WORK:-$build/fuzz-work}"
targets="${FUZZ_TARGETS:-npy safetensors number json report}"

if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "fuzz.sh: SECONDS must be a positive integer, got '$seconds'" >&2
  exit 2
fi

status=0
printf '%-12s %8s %12s %9s %9s %9s  %s\n' target seconds executions cov_start cov_end new_units result
for t in $targets; do
  bin="$build/fuzz/fuzz_$t"
  if [ ! -x "$bin" ]; then
    echo "fuzz.sh: $bin missing; configure with -DTIEBREAK_BUILD_FUZZERS=ON and build target tiebreak_fuzzers" >&2
    exit 2
  fi
  mkdir -p "$work/$t/corpus"
  dict=()
  [ -f "$root/tests/fuzz/$t.dict" ] && dict=(-dict="$root/tests/fuzz/$t.dict")
  log="$work/$t/fuzz.log"
  start=$(date +%s)
  nice -n 10 "$bin" "$work/$t/corpus" "$root/tests/fuzz/corpus/$t" "${dict[@]}" \
    -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$work/$t/" >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  cov0=$(grep -m1 -o 'INITED cov: [0-9]*' "$log" | grep -o '[0-9]*$')
  cov1=$(grep -o ' cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
  units=$(grep -o 'stat::new_units_added: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  result=ok
  if [ "$rc" -ne 0 ]; then
    status=1
    artifact=$(grep -o "Test unit written to [^ ]*" "$log" | tail -1 | sed 's/Test unit written to //')
    kind=$(grep -m1 -oE 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer): [a-zA-Z-]+|runtime error: .*|uncaught exception|out-of-memory' "$log" | head -1)
    result="FAILED (rc $rc: ${kind:-see log}) ${artifact:-}; log $log"
  fi
  printf '%-12s %8s %12s %9s %9s %9s  %s\n' "$t" "$took" "${execs:-?}" "${cov0:-?}" "${cov1:-?}" "${units:-?}" "$result"
done
exit $status
