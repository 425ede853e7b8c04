#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The base tree of a before/after benchmark: the files of commit REF (default HEAD, i.e. the tree
# before uncommitted changes; name the commit before yours otherwise) exported into DIR (default
# build-ab-base, which git ignores), with the commit's short name in DIR/.ab-base-ref. Then, on the
# device, carry DIR and set TIEBREAK_ATTN_BENCH_BASE=DIR: tools/device-check.sh attn-bench builds the
# base tree's attention_bench too and times both on the same cases in one run (docs/attention-bench.md,
# "Before and after in one run"). DIR is replaced only if it is new, empty or an earlier export.
#   tools/ab-base.sh [REF] [DIR]
#   tools/ab-base.sh --fingerprint DIR   one line naming DIR's files and contents (sha1), not their
#                                        times: git archive dates every file to the commit, so a
#                                        build folder kept from an earlier base would look up to date
#                                        to make and ninja; device-check rebuilds when this changes
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ "${1:-}" = "--fingerprint" ]; then
  [ -d "${2:-}" ] || { echo "ab-base: --fingerprint needs a folder" >&2; exit 2; }
  (cd "$2" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha1sum) | sha1sum | cut -d' ' -f1
  exit 0
fi
ref="${1:-HEAD}"
dir="${2:-$root/build-ab-base}"
sha=$(git -C "$root" rev-parse --verify --short "$ref^{commit}") || { echo "ab-base: $ref is not a commit" >&2; exit 2; }
# Only an earlier export (or an empty or new folder) is replaced: DIR is removed first.
if [ -e "$dir" ] && [ ! -f "$dir/.ab-base-ref" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
  echo "ab-base: $dir exists and is not an earlier export (no .ab-base-ref); not replacing it" >&2
  exit 2
fi
rm -rf "$dir"
mkdir -p "$dir"
git -C "$root" archive "$sha" | tar -x -C "$dir"
echo "$sha" >"$dir/.ab-base-ref"
echo "ab-base: $sha in $dir ($(du -sh "$dir" | cut -f1)); carry it to the device and set TIEBREAK_ATTN_BENCH_BASE=${dir#"$root"/}"
