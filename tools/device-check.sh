#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one script the lent GPU machine runs, from the repository root:
#   tools/device-check.sh [stage...]      stages: build sass test sanitize mma audit attn-bench experiment
#                                         attn-bench-quick attn-ncu attn-cli gemm python (default: the first five;
#                                         the others run only when named)
# Configures with CUDA (sm_90 + sm_90a), builds tiebreak::gpu and the GPU tests, dumps the SASS of
# every table instruction, runs `ctest -L gpu`, runs compute-sanitizer on a reduced sweep, and prints a table of
# sweep times and mismatch counts. Logs go to $OUT (the device tool's return folder) or build-device/out.
#
# Dependencies: the machine has CUDA, CMake and Ninja but may lack Boost, fmt, nlohmann-json, CLI11
# and GoogleTest, and cannot download. When the top-level configure fails, the script builds the GPU
# targets alone through tests/gpu/standalone/CMakeLists.txt with GoogleTest from the system or from
# build-device-deps/googletest (a copy of /usr/src/googletest that the caller carries; ignored by git).
#
# Environment: TIEBREAK_DEVICE_BUILD (build dir, default build-device), TIEBREAK_DEVICE_DEADLINE
# (seconds from start after which no new stage starts, default 560), TIEBREAK_GPU_SWEEP_LOG2 (passed
# to the tests), TIEBREAK_DEVICE_FILTER (a ctest -R regular expression over the test stage's test names, e.g. 'FlashGpu|sfu_gpu'), TIEBREAK_SANITIZE_TOOLS
# (default "memcheck racecheck initcheck synccheck"), TIEBREAK_MMA_IDENTIFY (a tiebreak_mma_identify built
# elsewhere, tried first by the mma stage), TIEBREAK_MMA_BUDGET (validation seconds, default 60),
# TIEBREAK_ATTN_BENCH_BUDGET (seconds of the attn-bench stage's measurements, default 120) and
# TIEBREAK_ATTN_BENCH_ARGS (more options of tools/attention-bench.py, e.g. "--dims 64,128 --scaling both"),
# TIEBREAK_ATTN_BENCH_BASE (a source tree made by tools/ab-base.sh, carried to the device: its
# attention_bench is timed beside this tree's, same cases, same run),
# TIEBREAK_PYTHON (the Python with torch, default python3).
# The mma stage runs the tensor-core identification, tiebreak_mma_identify (elimination, >= 1e8-case validation within the budget,
# GEMM identity); its GoogleTest twins (tests/mma/gpu) run in the test stage at 4e6 cases per
# instruction (10^8 with TIEBREAK_TEST_LEVEL=full builds, or tools/device-mma.sh MMA_GTEST=1).
set -uo pipefail

ROOT=$(pwd)
START=$(date +%s)
OUTDIR=${OUT:-$ROOT/build-device/out}
BUILD=${TIEBREAK_DEVICE_BUILD:-$ROOT/build-device}
DEADLINE=${TIEBREAK_DEVICE_DEADLINE:-560}
JOBS=$(nproc 2>/dev/null || echo 4)
mkdir -p "$OUTDIR" "$BUILD"
LOG="$OUTDIR/device-check.log"
: >"$LOG"
# The device tool brings back at most 8 files: on exit every file of $OUTDIR but these summaries goes
# into device-logs.tar.gz (TIEBREAK_DEVICE_KEEP replaces the list).
source "$(dirname "${BASH_SOURCE[0]}")/device-out.sh"
trap 'pack_out device-logs.tar.gz ${TIEBREAK_DEVICE_KEEP:-device-check.log ctest.log sanitizer-summary.txt attention-bench.md attention-bench.json attn-ncu.txt attn-ncu-source.txt}' EXIT

say() { echo "[device-check +$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }
left() { echo $(( DEADLINE - ($(date +%s) - START) )); }
run_logged() {  # run_logged FILE CMD...: tee the command's output into FILE and the main log
  local f=$1; shift
  "$@" 2>&1 | tee -a "$OUTDIR/$f" >>"$LOG"
  return "${PIPESTATUS[0]}"
}

stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build sass test sanitize mma)
want() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

say "stages: ${stages[*]}; build dir $BUILD; $JOBS jobs; deadline ${DEADLINE}s"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -2; cmake --version 2>&1 | head -1; } | tee -a "$LOG"

# --- configure + build -----------------------------------------------------------------------------
GPU_TARGETS=(tiebreak_gpu device_gpu_test round_gpu_test fast_gpu_test ops_gpu_test random_gpu_test mma_model_gpu_test mma_gpu_test tiebreak_mma_identify)
# Targets that exist only in some checkouts (added by later work) are built when CMake knows them.
OPTIONAL_GPU_TARGETS=(attention_reference_gpu_test audit_gpu_test attn_problem_gpu_test flash_gpu_test tiebreak_gemm_dump audit_gemm_gpu_test sfu_gpu_test tiebreak_ex2_probe)
# Built with the GPU targets when the full configure works, so the audit stage reuses them.
AUDIT_HOST_TARGETS=(audit_bench tiebreak_cli)
# With the benchmarks (the audit stage times audit_bench) where Google Benchmark is installed.
full_cfg() {
  cmake -S "$ROOT" -B "$BUILD/full" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIEBREAK_ENABLE_CUDA=ON \
    "-DCMAKE_CUDA_ARCHITECTURES=90-real;90a-real" -DTIEBREAK_BUILD_BENCHMARKS="$1" -DTIEBREAK_BUILD_TESTS=ON >>"$LOG" 2>&1
}
if want build; then
  mode=""
  if full_cfg ON || { rm -f "$BUILD/full/CMakeCache.txt"; full_cfg OFF; }; then
    mode=full
  else
    say "top-level configure failed (missing host dependencies?): building the GPU targets alone"
    gsrc=""
    for d in "$ROOT/build-device-deps/googletest" /usr/src/googletest; do
      [ -f "$d/CMakeLists.txt" ] && { gsrc=$d; break; }
    done
    if cmake -S "$ROOT/tests/gpu/standalone" -B "$BUILD/standalone" -G Ninja -DCMAKE_BUILD_TYPE=Release \
         -DTIEBREAK_GTEST_SOURCE="$gsrc" >>"$LOG" 2>&1; then
      mode=standalone
    else
      say "standalone configure failed too; see $LOG"; exit 2
    fi
  fi
  echo "$mode" >"$BUILD/mode"
  if [ "$mode" = full ]; then
    for t in "${OPTIONAL_GPU_TARGETS[@]}" "${AUDIT_HOST_TARGETS[@]}"; do
      cmake --build "$BUILD/$mode" --target help 2>/dev/null | grep -q "^$t:" && GPU_TARGETS+=("$t")
    done
  else
    GPU_TARGETS=(tiebreak_gpu device_gpu_test round_gpu_test fast_gpu_test ops_gpu_test random_gpu_test)
  fi
  say "configured ($mode); building ${GPU_TARGETS[*]}"
  t0=$(date +%s)
  if ! cmake --build "$BUILD/$mode" -j "$JOBS" --target "${GPU_TARGETS[@]}" >>"$LOG" 2>&1; then
    say "build failed:"; grep -E "error|Error" "$LOG" | head -40; exit 3
  fi
  say "built in $(( $(date +%s) - t0 ))s"
fi
mode=$(cat "$BUILD/mode" 2>/dev/null || echo standalone)
B="$BUILD/$mode"
find_bin() { find "$B" -type f -name "$1" -perm -u+x | head -1; }

# --- SASS: which SASS each table instruction compiled to ------------------------------------------------
if want sass; then
  say "SASS of the sweep kernels"
  objs=$(find "$B" -path '*tiebreak_gpu.dir*' -name 'sweep_*.o' | sort)
  : >"$OUTDIR/sass.txt"
  for o in $objs; do cuobjdump -sass "$o" >>"$OUTDIR/sass.txt" 2>&1; done
  python3 - "$ROOT/include/tiebreak/emu/instr_table.hpp" "$OUTDIR/sass.txt" "$OUTDIR/sass_hw.txt" \
    >"$OUTDIR/sass_summary.txt" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
block = src[src.index("#define TIEBREAK_GPU_INSTR_OPS(X)"):src.index("enum class instr_op")]
ops = re.findall(r"X\((\w+)\)", block.split("\n", 1)[1])
boring = set("MOV IMAD S2R S2UR LDG STG ISETP BRA EXIT ULDC IADD3 LEA LEA.HI SHF.R.U32.HI ULDC.64 NOP "
             "IMAD.WIDE IMAD.WIDE.U32 IMAD.MOV.U32 IMAD.SHL.U32 ISETP.GE.U32.AND ISETP.GE.U32.AND.EX "
             "LDC LDC.64 IMAD.X IADD3.X BSSY BSYNC CS2R MOV.U32 ISETP.GE.AND ISETP.NE.AND IMAD.HI.U32".split())
cur, funcs, text = None, {}, {}
arch = None
for line in open(sys.argv[2]):
    m = re.match(r"\s*arch = (sm_\w+)", line)
    if m: arch = m.group(1)
    m = re.search(r"Function : (\S+)", line)
    if m:
        cur = (arch, m.group(1)); funcs.setdefault(cur, []); text.setdefault(cur, []); continue
    m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
    if m and cur:
        funcs[cur].append(m.group(1))
        text[cur].append(line.split(";")[0].strip() + " ;")
def op_of(name):
    m = re.search(r"instr_opE(\d+)E", name)
    return ops[int(m.group(1))] if m and int(m.group(1)) < len(ops) else None
rows, hw_text = [], []
for (arch, name), ins in sorted(funcs.items()):
    op = op_of(name)
    if op is None: continue
    if "apply_kernel" in name and "Lb1E" in name:
        kind = "hw-only"
        keep = [i for i in ins if i not in boring]
        hw_text.append("== %s %s\n%s\n" % (op, arch, "\n".join(text[(arch, name)])))
    elif "sweep_kernel" in name:
        kind = "sweep"
        keep = [i for i in ins if re.match(r"(F2F|F2FP|HADD2|HMUL2|HFMA2|HMNMX2|FRND|F2I|I2F)", i)]
    else:
        continue
    seen = []
    for i in keep:
        if i not in seen: seen.append(i)
    rows.append((op, arch, kind, " ".join(seen)))
for r in sorted(rows, key=lambda r: (ops.index(r[0]), r[1], r[2])):
    print("%-28s %-7s %-8s %s" % r)
open(sys.argv[3], "w").write("".join(hw_text))  # full SASS of the instruction-only kernels
PY
  say "SASS summary: $(wc -l <"$OUTDIR/sass_summary.txt") kernel rows"
  rm -f "$OUTDIR/sass.txt"  # tens of MB: the summary and sass_hw.txt come back instead
fi

# --- the GPU tests --------------------------------------------------------------------------------
status=0
if want test; then
  budget=$(( $(left) - 20 ))
  if [ "$budget" -lt 30 ]; then say "no time left for the tests"; else
    say "ctest -L gpu (budget ${budget}s)"
    t0=$(date +%s)
    ( cd "$B" && timeout "$budget" ctest -L gpu -V --timeout 900 ${TIEBREAK_DEVICE_FILTER:+-R "$TIEBREAK_DEVICE_FILTER"} ) \
      >"$OUTDIR/ctest.log" 2>&1
    status=$?
    say "ctest exit $status after $(( $(date +%s) - t0 ))s"
    grep -E "tests passed|tests failed|Failed|\(Failed\)|Timeout" "$OUTDIR/ctest.log" | tail -25 | tee -a "$LOG"
    grep -E "\[sweep\]|\[device\]" "$OUTDIR/ctest.log" | sed 's/^[0-9]*: //' >"$OUTDIR/sweeps.txt"
  fi
fi

# --- tensor cores ---------------------------------------------------------------------------------
if want mma; then
  b=$(( $(left) - 10 ))
  if [ "$b" -lt 40 ]; then say "mma skipped: no time left"; else
    mdir="$BUILD/mma-out"; rm -rf "$mdir"; mkdir -p "$mdir"
    mbudget=${TIEBREAK_MMA_BUDGET:-60}
    ident=${TIEBREAK_MMA_IDENTIFY:-$(find_bin tiebreak_mma_identify)}
    rc=127
    if [ -n "$ident" ] && [ -x "$ident" ]; then
      say "mma: prebuilt $ident, validation budget ${mbudget}s"
      timeout "$b" "$ident" --instr all --cases 100000000 --budget-s "$mbudget" --out "$mdir" >"$mdir/mma-stdout.log" 2>&1
      rc=$?
      [ "$rc" -ge 126 ] && say "mma: prebuilt tiebreak_mma_identify did not start (exit $rc): $(head -c 300 "$mdir/mma-stdout.log")"
    fi
    if [ "$rc" -ge 126 ]; then
      b=$(( $(left) - 10 ))
      say "mma: building with tools/device-mma.sh (budget ${b}s)"
      OUT="$mdir" MMA_BUDGET_S="$mbudget" timeout "$b" bash "$ROOT/tools/device-mma.sh" >/dev/null 2>&1
      rc=$?
    fi
    say "mma: exit $rc"
    for f in mma-stdout.log mma-summary.md mma-table.txt; do [ -f "$mdir/$f" ] && cp "$mdir/$f" "$OUTDIR/"; done
    grep -E "validat|mismatch|GEMM|gemm" "$mdir/mma-stdout.log" 2>/dev/null | tail -30 | tee -a "$LOG"
  fi
fi

# --- audit: the GPU f64 attention reference (issue 4) ----------------------------------------------
# Runs attention_reference_gpu_test and audit_gpu_test, then `audit_bench --gpu-timing` (the goal:
# B=4, H=16, S=4096, D=128, whole `tiebreak audit --device cuda` <= 2x the f64 reference pass) and,
# when a `tiebreak` binary is at hand, the CLI itself on the same file. Binaries: prebuilt ones in
# $TIEBREAK_AUDIT_PREBUILT (a carried folder holding them and, in lib/, the shared libraries they
# need) when they start here; else configured and built in $BUILD/audit (needs the host dependencies:
# Boost, Eigen, fmt, nlohmann-json, CLI11, GoogleTest, Google Benchmark; the H200 image has them).
# TIEBREAK_AUDIT_CLI=1 also builds `tiebreak` (it links every sweep: minutes more). TIEBREAK_AUDIT_SHAPE
# (B,H,S,D) changes the timed size. Figures go to $OUTDIR/audit.txt.
if want audit; then
  A_OUT="$OUTDIR/audit.txt"; : >"$A_OUT"
  abin=""
  pre=${TIEBREAK_AUDIT_PREBUILT:-}
  if [ -n "$pre" ] && [ -x "$pre/attention_reference_gpu_test" ]; then
    export LD_LIBRARY_PATH="$pre/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    if "$pre/attention_reference_gpu_test" --gtest_list_tests >/dev/null 2>>"$A_OUT"; then abin=$pre
    else say "audit: prebuilt binaries in $pre do not start here: building"; fi
  fi
  # The build stage's full folder, when it built the audit binaries.
  if [ -z "$abin" ] && [ -n "$(find_bin attention_reference_gpu_test)" ] && [ -n "$(find_bin audit_bench)" ]; then
    abin=$B
  fi
  if [ -z "$abin" ]; then
    AB="$BUILD/audit"
    if cmake -S "$ROOT" -B "$AB" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIEBREAK_ENABLE_CUDA=ON \
         "-DCMAKE_CUDA_ARCHITECTURES=90-real" -DTIEBREAK_BUILD_BENCHMARKS=ON -DTIEBREAK_BUILD_TESTS=ON >>"$LOG" 2>&1 &&
       timeout "$(( $(left) - 60 ))" cmake --build "$AB" -j "$JOBS" \
         --target attention_reference_gpu_test audit_gpu_test audit_bench \
         ${TIEBREAK_AUDIT_CLI:+tiebreak_cli} >>"$LOG" 2>&1; then
      abin=$AB
    else
      say "audit: configure/build failed (host dependencies missing?); see $LOG"; status=1
    fi
  fi
  if [ -n "$abin" ]; then
    fb() { find "$abin" -type f -name "$1" -perm -u+x | head -1; }
    for t in attention_reference_gpu_test audit_gpu_test; do
      exe=$(fb "$t")
      [ -n "$exe" ] || { say "audit: no $t"; status=1; continue; }
      b=$(( $(left) - 30 ))
      [ "$b" -lt 20 ] && { say "audit: $t skipped: no time left"; continue; }
      t0=$(date +%s)
      timeout "$b" "$exe" >"$OUTDIR/audit-$t.log" 2>&1
      rc=$?
      [ "$rc" -ne 0 ] && status=1
      say "audit: $t exit $rc in $(( $(date +%s) - t0 ))s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUTDIR/audit-$t.log" | tr '\n' ' ')"
      grep -E '^\[attention-ref\]|^\[  FAILED|Failure|row .*: max' "$OUTDIR/audit-$t.log" | head -60 | tee -a "$A_OUT" >>"$LOG"
    done
    exe=$(fb audit_bench)
    b=$(( $(left) - 10 ))
    if [ -n "$exe" ] && [ "$b" -gt 30 ]; then
      f=/tmp/tiebreak_audit_timing.safetensors
      timeout "$b" "$exe" --gpu-timing ${TIEBREAK_AUDIT_SHAPE:+--shape "$TIEBREAK_AUDIT_SHAPE"} --file "$f" 2>&1 | tee -a "$A_OUT" >>"$LOG"
      cli=$(fb tiebreak)
      b=$(( $(left) - 10 ))
      if [ -n "$cli" ] && [ -f "$f" ] && [ "$b" -gt 20 ]; then
        t0=$(date +%s%N)
        timeout "$b" "$cli" audit "$f" --device cuda -q -o "$f.cli.json" >/dev/null 2>>"$A_OUT"
        rc=$?
        echo "[audit-timing] tiebreak audit --device cuda (CLI, whole process) exit $rc in $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$A_OUT" >>"$LOG"
      fi
    else
      say "audit: timing skipped (no audit_bench or no time)"
    fi
    say "audit figures:"; grep -E "^\[audit-timing\]|max observed" "$A_OUT" | tee -a "$LOG"
  fi
fi

# --- gemm: audit-gemm on the project's tensor-core GEMM and on torch.matmul (issue 22) ------------
# tiebreak_gemm_dump runs gpu::mma_gemm (mma.m16n8k16.bf16, chunks in K order; and split-K 4 with an
# f32 host reduction) and tools/gemm-torch-dump.py runs torch.matmul in bf16 (cuBLAS; shapes from
# TIEBREAK_GEMM_TORCH_SHAPES; interpreter TIEBREAK_PYTHON, default python3); `tiebreak audit-gemm
# --identify` then names the scheme of each. Needs
# the full build (tiebreak_cli). Reports (JSON and Markdown) go to $OUTDIR/gemm/, the inputs to /tmp.
if want gemm; then
  G_OUT="$OUTDIR/gemm"; mkdir -p "$G_OUT"
  gdir=/tmp/tiebreak_gemm; rm -rf "$gdir"; mkdir -p "$gdir"
  gdump=$(find_bin tiebreak_gemm_dump); gcli=$(find_bin tiebreak)
  if { [ -z "$gdump" ] || [ -z "$gcli" ]; } && [ "$mode" = full ]; then
    say "gemm: building tiebreak_gemm_dump tiebreak_cli"
    cmake --build "$B" -j "$JOBS" --target tiebreak_gemm_dump tiebreak_cli >>"$LOG" 2>&1
    gdump=$(find_bin tiebreak_gemm_dump); gcli=$(find_bin tiebreak)
  fi
  if [ -z "$gdump" ] || [ -z "$gcli" ]; then
    say "gemm: skipped: no tiebreak_gemm_dump or tiebreak binary (needs the full configure)"; status=1
  else
    for sk in 1 4; do
      timeout 120 "$gdump" --out "$gdir/mma_gemm_splitk${sk}.safetensors" --m 2048 --n 2048 --k 4096 --split-k "$sk" \
        2>&1 | tee -a "$G_OUT/dumps.log" >>"$LOG"
    done
    timeout 300 "${TIEBREAK_PYTHON:-python3}" "$ROOT/tools/gemm-torch-dump.py" "$gdir" \
      --shapes "${TIEBREAK_GEMM_TORCH_SHAPES:-4096x4096x4096,1024x1024x8192}" 2>&1 | tee -a "$G_OUT/dumps.log" >>"$LOG"
    for f in "$gdir"/*.safetensors; do
      [ -f "$f" ] || continue
      b=$(( $(left) - 10 ))
      [ "$b" -lt 20 ] && { say "gemm: $(basename "$f") skipped: no time left"; continue; }
      n=$(basename "$f" .safetensors)
      t0=$(date +%s)
      timeout "$b" "$gcli" audit-gemm "$f" --identify --tiles 16 -o "$G_OUT/$n.json" >"$G_OUT/$n.md" 2>"$G_OUT/$n.err"
      rc=$?
      say "gemm: $n exit $rc in $(( $(date +%s) - t0 ))s: $(grep -hE 'reproduced bit for bit|No candidate|Verdict' "$G_OUT/$n.md" | tr '\n' ' ')"
      grep -h "exact reference" "$G_OUT/$n.err" | tee -a "$LOG" >/dev/null
    done
  fi
fi

# --- compute-sanitizer over every GPU test, on reduced problem sizes -------------------------------
# Every GPU test binary the build produced, every test in it (no filter), under each tool. Sizes are
# reduced so the slowdown of the tools fits the budget: sweeps of 2^16 inputs instead of 2^32
# (TIEBREAK_GPU_SWEEP_LOG2), MMA validations of 2^16 cases (TIEBREAK_MMA_GPU_CASES); the tests'
# assertions are the same. TIEBREAK_SANITIZE_TESTS narrows the binaries.
if want sanitize; then
  tools=${TIEBREAK_SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}
  if [ -n "${TIEBREAK_SANITIZE_TESTS:-}" ]; then
    read -r -a san_tests <<<"$TIEBREAK_SANITIZE_TESTS"
  else
    san_tests=()
    for t in device_gpu_test round_gpu_test fast_gpu_test ops_gpu_test random_gpu_test mma_model_gpu_test mma_gpu_test \
             "${OPTIONAL_GPU_TARGETS[@]}"; do
      [ "$t" = tiebreak_ex2_probe ] && continue  # a capture tool, not a test
      [ -n "$(find_bin "$t")" ] && san_tests+=("$t")
    done
  fi
  say "compute-sanitizer: tools $tools; binaries ${san_tests[*]}"
  : >"$OUTDIR/sanitizer.log"
  : >"$OUTDIR/sanitizer-summary.txt"
  for tool in $tools; do
    for t in "${san_tests[@]}"; do
      exe=$(find_bin "$t")
      [ -n "$exe" ] || { say "no $t binary"; continue; }
      b=$(( $(left) - 10 ))
      [ "$b" -lt 15 ] && { say "sanitizer $tool $t skipped: no time left"; echo "$tool $t SKIPPED (time)" >>"$OUTDIR/sanitizer-summary.txt"; continue; }
      t0=$(date +%s)
      echo "=== compute-sanitizer --tool $tool $t ===" >>"$OUTDIR/sanitizer.log"
      TIEBREAK_GPU_SWEEP_LOG2=16 TIEBREAK_MMA_GPU_CASES=65536 TIEBREAK_FLASH_GPU_REDUCED=1 timeout "$b" compute-sanitizer --tool "$tool" \
        --error-exitcode 99 "$exe" --gtest_brief=1 >"$OUTDIR/san-$tool-$t.log" 2>&1
      rc=$?
      cat "$OUTDIR/san-$tool-$t.log" >>"$OUTDIR/sanitizer.log"
      summ=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUTDIR/san-$tool-$t.log" | tail -1)
      gt=$(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUTDIR/san-$tool-$t.log" | tr '\n' ' ')
      rm -f "$OUTDIR/san-$tool-$t.log"
      echo "$tool $t exit=$rc ${summ:-no summary} $gt" >>"$OUTDIR/sanitizer-summary.txt"
      say "compute-sanitizer $tool $t: exit $rc in $(( $(date +%s) - t0 ))s; ${summ:-no summary}; $gt"
      [ "$rc" -ne 0 ] && status=1
    done
  done
fi

# --- attn-bench: the attention kernels against PyTorch SDPA (issues 17, 18; docs/attention-bench.md) ---
# Builds attention_bench in the full build folder (configuring it when the build stage did not), then
# tools/attention-bench.py runs it and times SDPA's flash and cuDNN backends on the same shapes, in
# this one call, and merges both into one table: $OUTDIR/attention-bench.md and .json (with the date,
# the device and the torch version), the program's JSON lines in $OUTDIR/tiebreak.jsonl. Default: B·S =
# 16k tokens, H = 16, D = 128, S = 1k/4k/16k, causal and not, the four modes with the probe off and
# on, forward and forward+backward, 5 timed calls after 2 warm-ups: about 1.1 PFLOP of tiebreak calls
# (10 s at 110 TFLOP/s) and a quarter of that for SDPA, plus torch's start; the measurements stop at
# TIEBREAK_ATTN_BENCH_BUDGET seconds whatever the speed. attn-bench-quick: S = 1k and 4k, probe off,
# 3 timed calls. Without attention_bench (no launchers, host dependencies missing) or without torch,
# the half that can run still does and the table says what is missing.
if want attn-bench || want attn-bench-quick; then
  ab_args=()
  want attn-bench-quick && ! want attn-bench && ab_args+=(--quick)
  read -r -a ab_extra <<<"${TIEBREAK_ATTN_BENCH_ARGS:-}"
  ab_bin="$BUILD/full/bench/attention_bench"
  if [ ! -f "$BUILD/full/CMakeCache.txt" ]; then
    say "attn-bench: configuring $BUILD/full"
    full_cfg ON || { rm -f "$BUILD/full/CMakeCache.txt"; full_cfg OFF; } || say "attn-bench: configure failed; see $LOG"
  fi
  b=$(( $(left) - 60 ))
  if [ -f "$BUILD/full/CMakeCache.txt" ] && [ "$b" -gt 30 ]; then
    t0=$(date +%s)
    if timeout "$b" cmake --build "$BUILD/full" -j "$JOBS" --target attention_bench >>"$LOG" 2>&1 && [ -x "$ab_bin" ]; then
      say "attn-bench: attention_bench built in $(( $(date +%s) - t0 ))s"
    else
      say "attn-bench: attention_bench did not build (no attention launchers in this tree?); see $LOG"
      grep -E "error|undefined reference" "$LOG" | tail -8 | tee -a "$OUTDIR/attn-bench.log"
      status=1
    fi
  fi
  # Before and after in one run: the base tree's attention_bench (tools/ab-base.sh REF makes the tree,
  # the device call carries it), configured without tests into $BUILD/base, built alone, then timed
  # by the script beside this tree's on the same cases (alternating; docs/attention-bench.md).
  if [ -n "${TIEBREAK_ATTN_BENCH_BASE:-}" ]; then
    bsrc=$TIEBREAK_ATTN_BENCH_BASE
    case $bsrc in /*) ;; *) bsrc="$ROOT/$bsrc" ;; esac
    b=$(( $(left) - 60 ))
    if [ ! -f "$bsrc/CMakeLists.txt" ]; then
      say "attn-bench: base tree $bsrc has no CMakeLists.txt (make it with tools/ab-base.sh and carry it)"; status=1
    elif [ "$b" -gt 30 ]; then
      t0=$(date +%s)
      # The exported files carry the commit's date, not today's: a base build kept from an earlier
      # call (another base) would look up to date. Its fingerprint decides; a new tree starts afresh.
      fp=$(bash "$ROOT/tools/ab-base.sh" --fingerprint "$bsrc")
      if [ "$(cat "$BUILD/base/.ab-base-fingerprint" 2>/dev/null)" != "$fp" ]; then rm -rf "$BUILD/base"; fi
      if cmake -S "$bsrc" -B "$BUILD/base" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIEBREAK_ENABLE_CUDA=ON \
           "-DCMAKE_CUDA_ARCHITECTURES=90-real;90a-real" -DTIEBREAK_BUILD_BENCHMARKS=OFF -DTIEBREAK_BUILD_TESTS=OFF >>"$LOG" 2>&1 &&
         timeout "$b" cmake --build "$BUILD/base" -j "$JOBS" --target attention_bench >>"$LOG" 2>&1 &&
         [ -x "$BUILD/base/bench/attention_bench" ]; then
        echo "$fp" >"$BUILD/base/.ab-base-fingerprint"
        blabel=$(cat "$bsrc/.ab-base-ref" 2>/dev/null || basename "$bsrc")
        ab_args+=(--base-bench "$BUILD/base/bench/attention_bench" --base-label "$blabel")
        say "attn-bench: base tree $blabel: attention_bench built in $(( $(date +%s) - t0 ))s"
      else
        say "attn-bench: the base tree's attention_bench did not build; see $LOG"; status=1
      fi
    else
      say "attn-bench: no time left to build the base tree; timing this tree alone"; status=1
    fi
  fi
  budget=${TIEBREAK_ATTN_BENCH_BUDGET:-120}
  b=$(( $(left) - 10 ))
  [ "$budget" -gt $(( b - 30 )) ] && budget=$(( b - 30 ))
  if [ "$budget" -lt 20 ]; then say "attn-bench skipped: no time left"; else
    say "attn-bench: tools/attention-bench.py ${ab_args[*]} ${ab_extra[*]} (measurements <= ${budget}s)"
    t0=$(date +%s)
    timeout "$b" "${TIEBREAK_PYTHON:-python3}" "$ROOT/tools/attention-bench.py" --bench "$ab_bin" --out "$OUTDIR" \
      --max-seconds "$budget" "${ab_args[@]}" "${ab_extra[@]}" >/dev/null 2>>"$OUTDIR/attn-bench.log"
    rc=$?
    say "attn-bench: exit $rc in $(( $(date +%s) - t0 ))s$([ -f "$OUTDIR/attention-bench.md" ] && echo "; table in $OUTDIR/attention-bench.md")"
    [ "$rc" -ne 0 ] && status=1
    grep -E "^attention-bench:|not measured|exited" "$OUTDIR/attn-bench.log" | tail -5 | tee -a "$LOG"
    [ -f "$OUTDIR/attention-bench.md" ] && sed -n '/^## Forward, D = 128/,/^## Every timed case/p' "$OUTDIR/attention-bench.md" | tee -a "$LOG"
  fi
fi

# --- attn-ncu: where the time of a call goes (issue 18: profile before changing) --------------------
# attention_bench under Nsight Compute (ncu; the device image has no Nsight Systems): per launch of the
# forward kernels and of the probe's per-head sum, its duration on the GPU, registers, occupancy and
# achieved warps, for the forward with the probe off and on (default: bf16, S = 1k and 16k, causal,
# B·S = 16k, H = 16, D = 128, one warm-up and one timed call; TIEBREAK_NCU_ARGS replaces those
# options, TIEBREAK_NCU_KERNELS the kernels' regular expression, e.g. 'flash_delta|flash_gradient' for
# the backward's; TIEBREAK_NCU_SOURCE=1 adds per-instruction counters, below, for the kernels of
# TIEBREAK_NCU_SOURCE_KERNEL, default flash_forward). Set against the bench's wall time per call, it splits a probed call's extra cost into
# the kernel's and the launcher's. ncu's CSV rows and the bench's JSON lines into $OUTDIR/attn-ncu.txt.
if want attn-ncu; then
  N_TXT="$OUTDIR/attn-ncu.txt"; : >"$N_TXT"
  ab_bin="$BUILD/full/bench/attention_bench"
  ncu_bin=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  if [ ! -f "$BUILD/full/CMakeCache.txt" ]; then full_cfg ON || { rm -f "$BUILD/full/CMakeCache.txt"; full_cfg OFF; }; fi
  b=$(( $(left) - 40 ))
  if [ ! -x "$ncu_bin" ]; then say "attn-ncu: no ncu on this machine"; status=1
  elif [ "$b" -gt 30 ] && timeout "$b" cmake --build "$BUILD/full" -j "$JOBS" --target attention_bench >>"$LOG" 2>&1; then
    read -r -a n_args <<<"${TIEBREAK_NCU_ARGS:---seqs 1024,16384 --causal on --modes bf16 --probe both --passes fwd --warmup 1 --reps 1}"
    t0=$(date +%s)
    n_kernels=${TIEBREAK_NCU_KERNELS:-flash_forward|head_block_sum}
    timeout $(( $(left) - 10 )) "$ncu_bin" --csv --page raw -k "regex:$n_kernels" \
      --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size \
      "$ab_bin" "${n_args[@]}" >>"$N_TXT" 2>&1
    say "attn-ncu: exit $? in $(( $(date +%s) - t0 ))s; $N_TXT"
    if [ -n "${TIEBREAK_NCU_SOURCE:-}" ] && [ "$(left)" -gt 60 ]; then
      # Where inside the kernel: per SASS instruction, executions and warp-stall samples (SourceCounters),
      # with the warp-state and instruction-mix sections, for the first forward launch of each probe setting
      # (attn-ncu-source.txt: the summary of ncu's source page; attn-ncu-details.txt: the sections).
      t0=$(date +%s); rep="$OUTDIR/attn-ncu-src"
      timeout $(( $(left) - 30 )) "$ncu_bin" -f -o "$rep" -k "regex:${TIEBREAK_NCU_SOURCE_KERNEL:-flash_forward}" \
        --section SourceCounters --section WarpStateStats --section InstructionStats --section SchedulerStats --section LaunchStats \
        --metrics smsp__sass_inst_executed_op_local_ld.sum,smsp__sass_inst_executed_op_local_st.sum,smsp__inst_executed.sum,smsp__thread_inst_executed_per_inst_executed.ratio \
        "$ab_bin" "${n_args[@]}" >>"$LOG" 2>&1
      "$ncu_bin" -i "$rep.ncu-rep" --page details >"$OUTDIR/attn-ncu-details.txt" 2>&1
      "$ncu_bin" -i "$rep.ncu-rep" --page source --print-source sass --csv >"$BUILD/attn-ncu-source.csv" 2>&1
      # megabytes per kernel: what comes back is its summary (before / in / after the tile loop, top
      # instructions), tools/ncu-source-summary.py
      "${TIEBREAK_PYTHON:-python3}" "$ROOT/tools/ncu-source-summary.py" "$BUILD/attn-ncu-source.csv" >"$OUTDIR/attn-ncu-source.txt" 2>&1
      rm -f "$rep.ncu-rep"
      say "attn-ncu: source counters in $(( $(date +%s) - t0 ))s; $OUTDIR/attn-ncu-source.txt"
    fi
  else
    say "attn-ncu: attention_bench did not build; see $LOG"; status=1
  fi
fi

# --- attn-cli: `tiebreak attention` and `tiebreak demo` on the GPU (issue 17; docs/attention.md) ---------
# In the full build folder: tiebreak_cli and cli_commands_test. For each mode (and fused scaling), one
# causal GQA problem with a ragged length on the GPU and on the host twin (--emulate): the two
# safetensors files must be byte-identical and the probe counters equal. Then cli_commands_test's
# attention and demo tests (the demo runs the kernels here), `tiebreak demo`'s time, and a larger run
# audited with the GPU reference. Output: $OUTDIR/attn-cli.log.
if want attn-cli; then
  C_LOG="$OUTDIR/attn-cli.log"; : >"$C_LOG"
  if [ ! -f "$BUILD/full/CMakeCache.txt" ]; then
    full_cfg OFF || say "attn-cli: configure failed; see $LOG"
  fi
  b=$(( $(left) - 60 ))
  if [ -f "$BUILD/full/CMakeCache.txt" ] && [ "$b" -gt 30 ] &&
     timeout "$b" cmake --build "$BUILD/full" -j "$JOBS" --target tiebreak_cli cli_commands_test >>"$LOG" 2>&1; then
    cli="$BUILD/full/tiebreak"
    W=$(mktemp -d)
    ok=1
    for m in bf16 fp32 debias stochastic bf16-fma; do
      am=${m%-fma}; extra=(); [ "$m" = bf16-fma ] && extra=(--scale-fma)
      args=(attention --mode "$am" "${extra[@]}" --causal --shape 2,4,200,128 --kv-heads 2 --seed 5 -q)
      if "$cli" "${args[@]}" -o "$W/gpu_$m.safetensors" >>"$C_LOG" 2>&1 &&
         "$cli" "${args[@]}" --emulate -o "$W/twin_$m.safetensors" >>"$C_LOG" 2>&1 &&
         cmp "$W/gpu_$m.safetensors" "$W/twin_$m.safetensors" >>"$C_LOG" 2>&1 &&
         python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(a["heads"]!=b["heads"] or a["backend"]!="gpu")'            "$W/gpu_$m.probe.json" "$W/twin_$m.probe.json"; then
        say "attn-cli: $m: GPU and twin files byte-identical, probe counters equal"
      else
        say "attn-cli: $m: GPU and twin DIFFER (or a run failed); see $C_LOG"; ok=0
      fi
    done
    [ "$ok" = 1 ] || status=1
    tb=$(find_bin cli_commands_test); [ -n "$tb" ] || tb=$(find "$BUILD/full" -type f -name cli_commands_test -perm -u+x | head -1)
    if [ -n "$tb" ]; then
      timeout 300 "$tb" --gtest_filter='AttentionCmd.*:DemoCmd.*' >>"$C_LOG" 2>&1; rc=$?
      [ "$rc" -ne 0 ] && status=1
      say "attn-cli: cli_commands_test (AttentionCmd, DemoCmd) exit $rc: $(grep -E '^\[  (PASSED|FAILED) ' "$C_LOG" | tr '\n' ' ')"
    fi
    t0=$(date +%s%N)
    "$cli" demo >"$OUTDIR/demo.txt" 2>>"$C_LOG"; rc=$?
    say "attn-cli: tiebreak demo exit $rc in $(( ($(date +%s%N) - t0) / 1000000 )) ms; $(grep -E '^\(seed' "$OUTDIR/demo.txt" | tail -1)"
    "$cli" attention --mode bf16 --shape 4,16,1024,128 --seed 3 -o "$W/big.safetensors" >>"$C_LOG" 2>&1 &&
      "$cli" audit "$W/big.safetensors" --device cuda -q | tail -2 | tee -a "$C_LOG" >>"$LOG"
    grep -E "forward .* backward" "$C_LOG" | tail -1 | tee -a "$LOG"
    rm -rf "$W"
  else
    say "attn-cli: tiebreak_cli or cli_commands_test did not build (host dependencies missing?); see $LOG"; status=1
  fi
fi

# --- python: the Python package's pytest suite with torch (issue 20, docs/python.md) ---------------
# The torch tests (tiebreak.torch: SDPA audit hook, spectral-norm tracker, two gloo processes,
# TensorBoard and JSON Lines, the attention custom op) skip in CI, where torch is not installed;
# here they run. TIEBREAK_PYTHON_CUDA=ON builds tiebreak._cuda, the attention kernels on CUDA
# tensors, so that the op's CUDA tests (the GPU op against the CPU twin, bit for bit) run too.
if want python; then
  P_LOG="$OUTDIR/python.log"; : >"$P_LOG"
  py=$(command -v "${TIEBREAK_PYTHON:-python3}")
  if [ ! -f "$BUILD/full/CMakeCache.txt" ]; then
    full_cfg OFF || say "python: configure failed; see $LOG"
  fi
  b=$(( $(left) - 60 ))
  if [ -f "$BUILD/full/CMakeCache.txt" ] && [ "$b" -gt 30 ] &&
     cmake -S "$ROOT" -B "$BUILD/full" -DTIEBREAK_PYTHON=ON -DTIEBREAK_PYTHON_CUDA=ON -DPython_EXECUTABLE="$py" >>"$LOG" 2>&1 &&
     timeout "$b" cmake --build "$BUILD/full" -j "$JOBS" --target tiebreak_cli tiebreak_python_core tiebreak_python_cuda tiebreak_python_stub >>"$LOG" 2>&1; then
    (cd "$BUILD/full" && timeout $(( $(left) > 40 ? $(left) - 10 : 30 )) ctest -R '^python_pytest$' -V) >"$P_LOG" 2>&1; rc=$?
    [ "$rc" -ne 0 ] && status=1
    say "python: ctest python_pytest exit $rc: $(grep -E '[0-9]+ (passed|failed).* in [0-9.]+s' "$P_LOG" | tail -1 | sed 's/^[0-9]*: //')"
    grep -E '^(SKIPPED|FAILED)' "$P_LOG" | head -20 | tee -a "$LOG"
  else
    say "python: the extension did not build (nanobind missing, or no time left); see $LOG"; status=1
  fi
fi

# --- experiment: the causal experiment on the kernels (issue 19, docs/experiment.md) ---------------
# experiment_test (its GPU case: the kernels and the twin give the same run bit for bit), then the
# full grid on the GPU, timed, JSON and HTML into $OUTDIR/experiment/. TIEBREAK_EXPERIMENT_ARGS adds
# arguments (e.g. "--steps 100" for a quick look); TIEBREAK_EXPERIMENT_BISECT=1 also runs the bisect
# (arguments TIEBREAK_BISECT_ARGS, e.g. "--steps 400 --seed 2").
if want experiment; then
  E_OUT="$OUTDIR/experiment"; mkdir -p "$E_OUT"; E_LOG="$E_OUT/experiment.log"; : >"$E_LOG"
  if [ ! -f "$BUILD/full/CMakeCache.txt" ]; then
    full_cfg OFF || say "experiment: configure failed; see $LOG"
  fi
  b=$(( $(left) - 60 ))
  if [ -f "$BUILD/full/CMakeCache.txt" ] && [ "$b" -gt 30 ] &&
     timeout "$b" cmake --build "$BUILD/full" -j "$JOBS" --target tiebreak_cli experiment_test >>"$LOG" 2>&1; then
    tb=$(find "$BUILD/full" -type f -name experiment_test -perm -u+x | head -1)
    timeout 300 "$tb" >>"$E_LOG" 2>&1; rc=$?
    [ "$rc" -ne 0 ] && status=1
    say "experiment: experiment_test exit $rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$E_LOG" | tr '\n' ' ')"
    b=$(( $(left) - 20 ))
    t0=$(date +%s)
    timeout "$b" "$BUILD/full/tiebreak" experiment causal --preset full --device gpu ${TIEBREAK_EXPERIMENT_ARGS:-} \
      -o "$E_OUT/full.json" --html "$E_OUT/full.html" >"$E_OUT/full.txt" 2>"$E_OUT/full.err"; rc=$?
    [ "$rc" -ne 0 ] && status=1
    say "experiment: full grid on the GPU exit $rc in $(( $(date +%s) - t0 ))s"
    tee -a "$LOG" <"$E_OUT/full.txt" >/dev/null; tail -3 "$E_OUT/full.err" | tee -a "$LOG"
    if [ "${TIEBREAK_EXPERIMENT_BISECT:-0}" = 1 ]; then
      t0=$(date +%s)
      timeout $(( $(left) - 10 )) "$BUILD/full/tiebreak" experiment bisect --preset full --device gpu ${TIEBREAK_BISECT_ARGS:-} \
        -o "$E_OUT/bisect.json" >"$E_OUT/bisect.txt" 2>"$E_OUT/bisect.err"; rc=$?
      say "experiment: bisect exit $rc in $(( $(date +%s) - t0 ))s: $(tail -1 "$E_OUT/bisect.txt")"
    fi
    rm -rf "$E_OUT"/*.ckpt
  else
    say "experiment: tiebreak_cli or experiment_test did not build; see $LOG"; status=1
  fi
fi

# --- summary ---------------------------------------------------------------------------------------
if [ -f "$OUTDIR/sweeps.txt" ]; then
  say "sweep table (instruction, inputs covered, mismatches, device seconds):"
  grep -E "covered=" "$OUTDIR/sweeps.txt" | awk '{printf "  %-40s %s %s %s\n", $2, $3, $4, $5}' | tee -a "$LOG"
fi
say "done; exit $status"
exit "$status"
