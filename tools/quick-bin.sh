#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packs binaries built here for the device (sm_90a) into a folder to carry, so that
# tools/device-quick.sh skips its own build (TIEBREAK_QUICK_BIN, TIEBREAK_QUICK_BASE_BIN):
#   tools/quick-bin.sh BUILD DIR [LABEL]
# copies BUILD's attention_bench and, where built, flash_gpu_test into DIR (replaced only if it is new,
# empty or an earlier pack) and writes LABEL (default: the tree's .ab-base-ref when it is an export by
# tools/ab-base.sh, else its `git describe --always --dirty`) into DIR/.quick-bin-ref. It refuses binaries without sm_90a code (cuobjdump --list-elf, where
# cuobjdump exists) or older than a source file of the tree they were built from (BUILD's
# CMakeCache.txt names it), the two ways a carried binary would time the wrong kernels.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: tools/quick-bin.sh BUILD DIR [LABEL]" >&2; exit 2; }
build=$1 dir=$2
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null) ||
  { echo "quick-bin: $build is not a CMake build folder" >&2; exit 2; }
[ -n "$src" ] || { echo "quick-bin: $build/CMakeCache.txt names no source tree" >&2; exit 2; }
if [ -n "${3:-}" ]; then label=$3
elif [ -f "$src/.ab-base-ref" ]; then label=$(cat "$src/.ab-base-ref")   # an export by tools/ab-base.sh
else label=$(git -C "$src" describe --always --dirty 2>/dev/null || echo unknown)
fi
bench=$build/bench/attention_bench
[ -x "$bench" ] || { echo "quick-bin: $bench is not built" >&2; exit 2; }
test=$(find "$build" -name flash_gpu_test -type f -perm -u+x | head -1)
newest=$(find "$src/include" "$src/cuda" "$src/bench" "$src/src" -type f -newer "$bench" -print -quit 2>/dev/null || true)
[ -z "$newest" ] || { echo "quick-bin: $newest is newer than $bench: rebuild first" >&2; exit 2; }
if command -v cuobjdump >/dev/null; then
  # the listing read whole before the match: grep -q would stop reading, and pipefail would take
  # cuobjdump's SIGPIPE for a missing sm_90a
  elfs=$(cuobjdump --list-elf "$bench")
  grep -q sm_90a <<<"$elfs" || { echo "quick-bin: $bench has no sm_90a code" >&2; exit 2; }
fi
if [ -e "$dir" ] && [ ! -f "$dir/.quick-bin-ref" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
  echo "quick-bin: $dir exists and is not an earlier pack (no .quick-bin-ref); not replacing it" >&2
  exit 2
fi
rm -rf "$dir"; mkdir -p "$dir"
cp "$bench" "$dir/"
[ -n "$test" ] && cp "$test" "$dir/"
echo "$label" >"$dir/.quick-bin-ref"
echo "quick-bin: $label in $dir ($(du -sh "$dir" | cut -f1)): $(ls "$dir" | tr '\n' ' ')"
