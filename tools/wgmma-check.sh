#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Device check of the wgmma kernels (forward, dQ, dK/dV): prebuilt sm_90a binaries in WG_BIN
# (flash_gpu_test, attention_bench) and main's attention_bench in WG_BASE, carried. Runs the forward's
# bit-identity tests (WG_FILTER), memcheck (WG_MEMCHECK=0: none) and with WG_RACECHECK=1 racecheck on the
# forward test (WG_SAN_FILTER; WG_SAN_S seconds each, default 90), then times bf16 fused sfu
# (WG_PASSES, default fwd; WG_PROBE, default off), causal and not, for this tree and main in turns,
# twice, the better median of each. Output in $OUT.
B=${WG_BIN:-build-wg}
BASE=${WG_BASE:-build-wg/attention_bench_main}
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout ${WG_TEST_S:-120} "$B/flash_gpu_test" --gtest_filter="${WG_FILTER:-FlashGpu.ForwardBitIdenticalToTwin:FlashGpu.ProbeCounters*:FlashGpu.Misaligned*}" > "$OUT/flash-gpu.log" 2>&1
echo "flash_gpu_test exit $?"
grep -E "^\[  (PASSED|FAILED)|OK \]|FAILED|twin == device|blocks per SM|Expected|Which is" "$OUT/flash-gpu.log" | head -30
san() {  # $1: memcheck or racecheck
  timeout "${WG_SAN_S:-90}" compute-sanitizer --tool "$1" "$B/flash_gpu_test" --gtest_filter="${WG_SAN_FILTER:-FlashGpu.ForwardBitIdenticalToTwin}" > "$OUT/$1.log" 2>&1
  echo "$1 exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$1.log" | tr '\n' ' ')"
}
[ "${WG_MEMCHECK:-1}" = 1 ] && san memcheck
[ "${WG_RACECHECK:-0}" = 1 ] && san racecheck
args=(--dims 64,128 --seqs 1024,4096,16384 --causal both --modes bf16 --scaling fused --probe ${WG_PROBE:-off} --exp sfu --passes ${WG_PASSES:-fwd} --reps 5)
for round in 1 2; do
  timeout 60 "$B/attention_bench" "${args[@]}" 2>/dev/null | grep '"result"' > "$OUT/bench-wg-$round.jsonl"
  timeout 60 "$BASE" "${args[@]}" 2>/dev/null | grep '"result"' > "$OUT/bench-main-$round.jsonl"
done
python3 - "$OUT" <<'PY'
import json, sys, glob, statistics
out = sys.argv[1]
def load(tag):
    r = {}
    for f in sorted(glob.glob(f"{out}/bench-{tag}-*.jsonl")):
        for l in open(f):
            x = json.loads(l)
            r.setdefault((x["pass"], x["dim"], x["seq"], x["causal"], x["probe"]), []).append(x["tflops"])
    return {k: max(v) for k, v in r.items()}
wg, mn = load("wg"), load("main")
print("pass D S causal probe | wgmma TFLOP/s | main TFLOP/s | ratio")
for k in sorted(wg):
    if k in mn:
        print(*k, "| %.1f | %.1f | %.3f" % (wg[k], mn[k], wg[k] / mn[k]))
PY
