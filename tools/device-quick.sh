#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A lean device call for an attention kernel change when little device time is left (tools/device-check.sh
# builds every GPU target for sm_90 and sm_90a first, ~140 s): configures with CUDA for sm_90a only,
# builds flash_gpu_test and attention_bench (or takes them from TIEBREAK_QUICK_BIN), then
#   1. flash_gpu_test (FlashGpu: twin == device, bit for bit; occupancy; TIEBREAK_QUICK_TEST=0 skips it,
#      for a binary already validated),
#   2. compute-sanitizer memcheck on its backward test (TIEBREAK_QUICK_MEMCHECK=0 skips it), and with
#      TIEBREAK_QUICK_RACECHECK=1 racecheck on the same (TIEBREAK_QUICK_SAN_FILTER: their gtest filter,
#      default FlashGpu.ForwardAndBackward*),
#   3. Nsight Compute's per-kernel durations of one forward+backward (TIEBREAK_QUICK_NCU_ARGS, default
#      S = 4k, bf16, probe off, sfu) for the forward, delta and gradient kernels
#      (TIEBREAK_QUICK_NCU_METRICS: other metrics, default gpu__time_duration.sum; TIEBREAK_QUICK_NCU_KERNELS:
#      another kernel regex, e.g. with head_block_sum for the probe's sum kernel; TIEBREAK_QUICK_NCU_EXTRA: more
#      ncu options, e.g. "--clock-control none --cache-control none" for durations at the clocks a timed call sees),
#   4. with TIEBREAK_QUICK_RAW_ARGS, attention_bench itself on those options (JSON lines, quick-raw.jsonl)
#      while nvidia-smi logs the SM clock, power and throttle reasons every 100 ms (quick-clocks.csv):
#      for timings that ncu's locked clocks would hide,
#   5. the base tree, with TIEBREAK_QUICK_BASE (a tree made by tools/ab-base.sh and carried): its
#      attention_bench built for sm_90a; or TIEBREAK_QUICK_BASE_BIN, a base attention_bench built
#      elsewhere and carried,
#   6. with TIEBREAK_QUICK_NCU_SOURCE=1, ncu's source counters (executions and stall samples per SASS
#      instruction) of the kernels matching TIEBREAK_QUICK_NCU_SOURCE_KERNEL (default flash_forward),
#      one profile per argument set of TIEBREAK_QUICK_NCU_SOURCE_ARGS (sets separated by ';'; default:
#      the ncu step's) and, with TIEBREAK_QUICK_NCU_SOURCE_BASE=1, the base's too, summarised by
#      tools/ncu-source-summary.py into quick-ncu-source.txt,
#   7. tools/attention-bench.py on TIEBREAK_QUICK_BENCH_ARGS (default: bf16 and fp32, probe off, sfu;
#      TIEBREAK_QUICK_BENCH=0 skips it), the base timed beside this tree, same cases, same run.
# Binaries built elsewhere save the device build (~200 s): TIEBREAK_QUICK_BIN names a carried folder
# holding flash_gpu_test and attention_bench built for sm_90a (tools/quick-bin.sh packs them).
# Everything lands in $OUT. Steps run in this order, the most needed first, so a call cut short still
# returns them. The device tool brings back at most 8 files, so on exit (also an early one) every file
# but the summaries (quick.log, attention-bench.md/json, ncu.csv, quick-ncu-source.txt, quick-raw.jsonl,
# quick-clocks.csv) is packed into quick-logs.tar.gz.
set -uo pipefail
OUTDIR=${OUT:-build-device/out}
B=${TIEBREAK_DEVICE_BUILD:-build-device}/quick
mkdir -p "$OUTDIR" "$B"
source "$(dirname "${BASH_SOURCE[0]}")/device-out.sh"
trap 'pack_out quick-logs.tar.gz quick.log attention-bench.md attention-bench.json ncu.csv quick-ncu-source.txt quick-raw.jsonl quick-clocks.csv' EXIT
say() { echo "[device-quick +$SECONDS s] $*" | tee -a "$OUTDIR/quick.log"; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a "$OUTDIR/quick.log"
if [ -n "${TIEBREAK_QUICK_BIN:-}" ]; then
  [ -x "$TIEBREAK_QUICK_BIN/attention_bench" ] || { say "TIEBREAK_QUICK_BIN=$TIEBREAK_QUICK_BIN has no attention_bench"; exit 1; }
  t=$TIEBREAK_QUICK_BIN/flash_gpu_test  # needed by the test and sanitizer steps only
  if [ ! -x "$t" ] && { [ "${TIEBREAK_QUICK_TEST:-1}" = 1 ] || [ "${TIEBREAK_QUICK_MEMCHECK:-1}" = 1 ] ||
                          [ "${TIEBREAK_QUICK_RACECHECK:-0}" = 1 ]; }; then
    say "TIEBREAK_QUICK_BIN=$TIEBREAK_QUICK_BIN has no flash_gpu_test (set TIEBREAK_QUICK_TEST=0 TIEBREAK_QUICK_MEMCHECK=0)"
    exit 1
  fi
  bench=$TIEBREAK_QUICK_BIN/attention_bench
  say "prebuilt binaries from $TIEBREAK_QUICK_BIN ($(cat "$TIEBREAK_QUICK_BIN/.quick-bin-ref" 2>/dev/null || echo 'no ref'))"
else
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIEBREAK_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a-real \
    -DTIEBREAK_BUILD_BENCHMARKS=ON -DTIEBREAK_BUILD_TESTS=ON >"$OUTDIR/quick-configure.log" 2>&1 || { say "configure failed"; exit 1; }
  cmake --build "$B" -j "$(nproc)" --target flash_gpu_test attention_bench >"$OUTDIR/quick-build.log" 2>&1 || { say "build failed"; tail -30 "$OUTDIR/quick-build.log"; exit 1; }
  say "built"
  t=$(find "$B" -name flash_gpu_test -type f -perm -u+x | head -1)
  bench=$B/bench/attention_bench
fi
rc=0
if [ "${TIEBREAK_QUICK_TEST:-1}" = 1 ]; then
  "$t" >"$OUTDIR/quick-flash-gpu.log" 2>&1; rc=$?
  say "flash_gpu_test exit $rc: $(grep -E '^\[  (PASSED|FAILED)' "$OUTDIR/quick-flash-gpu.log" | tr '\n' ' ')"
  grep -E "blocks per SM|twin == device|FAILED" "$OUTDIR/quick-flash-gpu.log" | tee -a "$OUTDIR/quick.log"
fi
for tool in memcheck racecheck; do
  if [ "$tool" = memcheck ]; then on=${TIEBREAK_QUICK_MEMCHECK:-1}; else on=${TIEBREAK_QUICK_RACECHECK:-0}; fi
  [ "$on" = 1 ] || continue
  compute-sanitizer --tool "$tool" "$t" --gtest_filter="${TIEBREAK_QUICK_SAN_FILTER:-FlashGpu.ForwardAndBackward*}" >"$OUTDIR/quick-$tool.log" 2>&1
  say "$tool exit $?: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUTDIR/quick-$tool.log" | tr '\n' ' ')"
done
ncu_bin=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
read -r -a n_args <<<"${TIEBREAK_QUICK_NCU_ARGS:---seqs 4096 --causal off --modes bf16 --probe off --exp sfu --passes fwd+bwd --warmup 0 --reps 1}"
read -r -a n_extra <<<"${TIEBREAK_QUICK_NCU_EXTRA:-}"
"$ncu_bin" --csv --page raw -k "regex:${TIEBREAK_QUICK_NCU_KERNELS:-flash_forward|flash_delta|flash_gradient}" \
  --metrics "${TIEBREAK_QUICK_NCU_METRICS:-gpu__time_duration.sum}" "${n_extra[@]}" "$bench" "${n_args[@]}" >"$OUTDIR/ncu.csv" 2>&1
say "ncu exit $?"
if [ -n "${TIEBREAK_QUICK_RAW_ARGS:-}" ]; then
  read -r -a r_args <<<"$TIEBREAK_QUICK_RAW_ARGS"
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv -lms 100 >"$OUTDIR/quick-clocks.csv" 2>&1 &
  smi=$!
  "$bench" "${r_args[@]}" >"$OUTDIR/quick-raw.jsonl" 2>"$OUTDIR/quick-raw.log"
  rc_raw=$?
  kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
  say "attention_bench (raw) exit $rc_raw"
  grep -h '^\[attention-bench\]' "$OUTDIR/quick-raw.log" "$OUTDIR/quick-raw.jsonl" | tee -a "$OUTDIR/quick.log"
fi
base_args=()
if [ -n "${TIEBREAK_QUICK_BASE_BIN:-}" ]; then
  if [ -x "$TIEBREAK_QUICK_BASE_BIN" ]; then
    base_args=(--base-bench "$TIEBREAK_QUICK_BASE_BIN" --base-label "$(cat "$(dirname "$TIEBREAK_QUICK_BASE_BIN")/.quick-bin-ref" 2>/dev/null || echo base)")
    say "prebuilt base $TIEBREAK_QUICK_BASE_BIN"
  else
    say "TIEBREAK_QUICK_BASE_BIN=$TIEBREAK_QUICK_BASE_BIN is not executable: no base"
  fi
elif [ -n "${TIEBREAK_QUICK_BASE:-}" ]; then
  BB=${TIEBREAK_DEVICE_BUILD:-build-device}/quick-base
  if cmake -S "$TIEBREAK_QUICK_BASE" -B "$BB" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIEBREAK_ENABLE_CUDA=ON \
       -DCMAKE_CUDA_ARCHITECTURES=90a-real -DTIEBREAK_BUILD_BENCHMARKS=OFF -DTIEBREAK_BUILD_TESTS=OFF >"$OUTDIR/quick-base-build.log" 2>&1 &&
     cmake --build "$BB" -j "$(nproc)" --target attention_bench >>"$OUTDIR/quick-base-build.log" 2>&1; then
    base_args=(--base-bench "$BB/bench/attention_bench" --base-label "$(cat "$TIEBREAK_QUICK_BASE/.ab-base-ref" 2>/dev/null || echo base)")
    say "base tree built"
  else
    say "base tree did not build: $(tail -3 "$OUTDIR/quick-base-build.log" | tr '\n' ' ')"
  fi
fi
if [ "${TIEBREAK_QUICK_NCU_SOURCE:-0}" = 1 ]; then
  # One profile per (binary, argument set): this tree's, and the base's with TIEBREAK_QUICK_NCU_SOURCE_BASE=1;
  # TIEBREAK_QUICK_NCU_SOURCE_ARGS holds one or more argument sets separated by ';'. The summaries go into
  # quick-ncu-source.txt one after the other, each under a line naming its binary and arguments.
  src_bins=("$bench")
  [ "${TIEBREAK_QUICK_NCU_SOURCE_BASE:-0}" = 1 ] && [ ${#base_args[@]} -gt 0 ] && src_bins+=("${base_args[1]}")
  IFS=';' read -r -a s_sets <<<"${TIEBREAK_QUICK_NCU_SOURCE_ARGS:-${n_args[*]}}"
  : >"$OUTDIR/quick-ncu-source.txt"
  n=0
  for sb in "${src_bins[@]}"; do
    for set in "${s_sets[@]}"; do
      n=$((n + 1))
      read -r -a s_args <<<"$set"
      rep="$B/quick-ncu-src-$n"
      "$ncu_bin" -f -o "$rep" -k "regex:${TIEBREAK_QUICK_NCU_SOURCE_KERNEL:-flash_forward}" \
        --section SourceCounters --section WarpStateStats --section InstructionStats --section LaunchStats \
        "$sb" "${s_args[@]}" >"$OUTDIR/quick-ncu-source-$n.log" 2>&1
      say "ncu source counters $n ($sb ${s_args[*]}) exit $?"
      "$ncu_bin" -i "$rep.ncu-rep" --page source --print-source sass --csv >"$B/quick-ncu-source-$n.csv" 2>&1
      { echo "=== $n: $sb ${s_args[*]}"
        "${TIEBREAK_PYTHON:-python3}" tools/ncu-source-summary.py "$B/quick-ncu-source-$n.csv" 2>&1; } >>"$OUTDIR/quick-ncu-source.txt"
      "$ncu_bin" -i "$rep.ncu-rep" --page details >"$OUTDIR/quick-ncu-details-$n.txt" 2>&1
      say "ncu source summary $n exit $?"
    done
  done
fi
if [ "${TIEBREAK_QUICK_BENCH:-1}" = 1 ]; then
  read -r -a b_args <<<"${TIEBREAK_QUICK_BENCH_ARGS:---modes bf16,fp32 --probe off --exp sfu --max-seconds 60}"
  "${TIEBREAK_PYTHON:-python3}" tools/attention-bench.py --bench "$bench" --out "$OUTDIR" "${base_args[@]}" "${b_args[@]}" >"$OUTDIR/quick-bench.log" 2>&1
  say "attention-bench exit $?"
fi
exit "$rc"
