#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ASan + UBSan run of the host test suite and a short run of every libFuzzer target (issue 7,
# docs/fuzzing.md, docs/testing.md). One clang build folder serves both: TIEBREAK_BUILD_FUZZERS
# compiles every host source with -fsanitize=address,undefined -fno-sanitize-recover=undefined
# (plus libFuzzer's coverage counters) and CUDA off, and TIEBREAK_BUILD_TESTS adds the tests. The same
# option defines TIEBREAK_NO_FORCEINLINE: the core's forced inlining made the ASan build 4x longer.
#
#   tools/sanitize.sh [all|test|fuzz]    default all: build, ctest, then the fuzz targets
#   SANITIZE_BUILD=build-asan            build folder (separate from the normal build)
#   SANITIZE_FUZZ_SECONDS=30             seconds per fuzz target
#   SANITIZE_CTEST_ARGS=""               extra ctest arguments; default none: every host and CLI test,
#                                        the 2^32 sweeps (label exhaustive) too, at the smoke level
#                                        (every 16 * 257th block of inputs: the quick level took 97 s
#                                        of the ctest step on 2 cores). "-LE exhaustive" skips them.
#   TIEBREAK_SKIP_DEPS=1                 skip tools/install-deps.sh sanitize
# Exits non-zero when the build fails, any test fails (a sanitizer report aborts the test), or any
# fuzz target crashes, hangs, leaks or breaks an invariant.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

what="${1:-all}"
case "$what" in all|test|fuzz) ;; *) echo "sanitize.sh: unknown step '$what' (all, test, fuzz)" >&2; exit 2 ;; esac
build="${SANITIZE_BUILD:-build-asan}"
seconds="${SANITIZE_FUZZ_SECONDS:-30}"
ctest_args="${SANITIZE_CTEST_ARGS:-}"
jobs=$(nproc 2>/dev/null || echo 2)

if [ "${TIEBREAK_SKIP_DEPS:-0}" != 1 ]; then
  TIEBREAK_SKIP_PIP=1 bash tools/install-deps.sh sanitize
fi

t0=$(date +%s)
# -O1 (asserts kept): ASan's recommended level; compiles far faster than -O3 on 2 cores.
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 \
  -DTIEBREAK_ENABLE_CUDA=OFF -DTIEBREAK_BUILD_FUZZERS=ON -DTIEBREAK_BUILD_TESTS=ON \
  -DTIEBREAK_BUILD_BENCHMARKS=OFF -DTIEBREAK_INSTALL=OFF -DTIEBREAK_TEST_LEVEL=smoke >/dev/null
cmake --build "$build" -j "$jobs"
t1=$(date +%s)
echo "sanitize: build $(( t1 - t0 )) s"

# halt_on_error: the first report fails the test; detect_leaks: LeakSanitizer at exit.
# allocator_may_return_null: an impossible allocation throws std::bad_alloc as in the ordinary
# build (the readers turn it into a one-line error) instead of aborting.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

status=0
if [ "$what" != fuzz ]; then
  # shellcheck disable=SC2086
  ctest --test-dir "$build" --output-on-failure -j "$jobs" $ctest_args || status=1
  t2=$(date +%s)
  echo "sanitize: ctest $(( t2 - t1 )) s"
fi
if [ "$what" != test ]; then
  t3=$(date +%s)
  FUZZ_BUILD="$root/$build" bash tools/fuzz.sh "$seconds" || status=1
  echo "sanitize: fuzz $(( $(date +%s) - t3 )) s"
fi
echo "sanitize: total $(( $(date +%s) - t0 )) s, $( [ $status = 0 ] && echo ok || echo FAILED )"
exit $status
