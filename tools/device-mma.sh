#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Tensor-core identification (tiebreak_mma_identify) on the device machine, in one call (docs/tensor-cores.md):
#   1. builds tiebreak_mma_identify with plain nvcc for sm_90a (needs only the core headers, src/host/include and CUDA;
#      the 8 instruction files compile in parallel),
#   2. dumps the SASS of the instructions (HMMA / HGMMA / QGMMA),
#   3. runs the designed cases, the elimination, the validation (>= 1e8 cases per instruction, within a time
#      budget) and the GEMM bit-identity check,
#   4. optionally (MMA_GTEST=1, needs GoogleTest there) builds and runs tests/mma/gpu with CMake.
# Logs go to $OUT (at most 8 files come back): mma-stdout.log, mma-identify.log, mma-summary.md,
# mma-table.txt, mma-sass.txt, mma-build.log.
# Environment: OUT (default ./mma-out), MMA_CASES (default 100000000), MMA_BUDGET_S (validation
# seconds for all instructions, default 240), MMA_INSTR (default all), MMA_GTEST (default 0).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/mma-out}
mkdir -p "$OUT"
CASES=${MMA_CASES:-100000000}
BUDGET=${MMA_BUDGET_S:-240}
INSTR=${MMA_INSTR:-all}
BUILD=/tmp/tiebreak-mma-build
mkdir -p "$BUILD"
start=$(date +%s)

{
  echo "== host: $(uname -m), $(nproc) cores"
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>&1 || true
  nvcc --version | tail -2
} > "$OUT/mma-build.log" 2>&1

# 1. Build. Flags as tiebreak_numerics_flags: no FMA contraction, no fast math.
NVFLAGS=(-std=c++20 -O2 --fmad=false --expt-relaxed-constexpr -Xcompiler=-ffp-contract=off
         -gencode=arch=compute_90a,code=sm_90a -Iinclude -Icuda/include)
pids=()
for f in cuda/mma/inst_*.cu cuda/mma/mma_launch.cu; do
  nvcc "${NVFLAGS[@]}" -Xptxas -v -c "$f" -o "$BUILD/$(basename "$f" .cu).o" > "$BUILD/$(basename "$f" .cu).log" 2>&1 &
  pids+=($!)
done
g++ -std=c++20 -O2 -ffp-contract=off -fno-fast-math -Iinclude -Icuda/include -I"$(dirname "$(command -v nvcc)")/../include" \
  -Isrc/host/include -c cuda/mma/identify_main.cpp -o "$BUILD/identify_main.o" > "$BUILD/identify_main.log" 2>&1 &
pids+=($!)
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
cat "$BUILD"/*.log >> "$OUT/mma-build.log"
if [ "$fail" != 0 ]; then
  echo "BUILD FAILED (see mma-build.log)" | tee -a "$OUT/mma-stdout.log"
  exit 1
fi
nvcc -gencode=arch=compute_90a,code=sm_90a -o "$BUILD/tiebreak_mma_identify" "$BUILD"/*.o -lpthread >> "$OUT/mma-build.log" 2>&1 || {
  echo "LINK FAILED (see mma-build.log)" | tee -a "$OUT/mma-stdout.log"; exit 1; }
echo "== build took $(( $(date +%s) - start )) s" | tee -a "$OUT/mma-build.log"

# 2. SASS of the tensor-core instructions actually executed.
{
  for o in "$BUILD"/inst_*.o; do
    echo "== $(basename "$o")"
    cuobjdump --dump-sass "$o" 2>&1 | grep -oE '(HMMA|HGMMA|QGMMA)[.A-Z0-9_]*' | sort | uniq -c
  done
} > "$OUT/mma-sass.txt" 2>&1

# 3. Probes, elimination, validation, GEMM identity.
"$BUILD/tiebreak_mma_identify" --instr "$INSTR" --cases "$CASES" --budget-s "$BUDGET" --out "$OUT" 2>&1 | tee "$OUT/mma-stdout.log"
rc=${PIPESTATUS[0]}
echo "== tiebreak_mma_identify exit $rc after $(( $(date +%s) - start )) s" | tee -a "$OUT/mma-stdout.log"

# 4. Optional: the GoogleTest device tests through CMake (only where GoogleTest is installed).
if [ "${MMA_GTEST:-0}" = 1 ]; then
  {
    cmake -S . -B /tmp/tiebreak-gtest -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIEBREAK_ENABLE_CUDA=ON \
      -DTIEBREAK_BUILD_BENCHMARKS=OFF -DTIEBREAK_TEST_LEVEL=quick &&
      cmake --build /tmp/tiebreak-gtest -j "$(nproc)" --target mma_gpu_test &&
      /tmp/tiebreak-gtest/tests/mma/gpu/mma_gpu_test
  } >> "$OUT/mma-stdout.log" 2>&1 || echo "gtest step failed (see mma-stdout.log)" | tee -a "$OUT/mma-stdout.log"
fi
exit "$rc"
