#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Times attention_bench once per value of an environment variable that tunes a launcher (e.g.
# TIEBREAK_DQ_CHAIN_LEAD) and, optionally, a base tree's attention_bench, in one run on one device:
#   tools/env-sweep.sh BENCH VAR "V1 V2 ..." [BASE_BENCH] -- ATTENTION_BENCH_ARGS...
# JSON lines go to $OUT (or build-device/out)/sweep-VAR-V.jsonl and sweep-base.jsonl, and
# sweep.md holds a table: one row per case, TFLOP/s per value (and the base), the best marked. On the
# device ($OUT set) everything but sweep.md is packed into sweep-logs.tar.gz (tools/device-out.sh).
set -uo pipefail
[ $# -ge 4 ] || { echo "usage: tools/env-sweep.sh BENCH VAR \"V1 V2 ...\" [BASE_BENCH] -- ARGS..." >&2; exit 2; }
bench=$1 var=$2 values=$3
shift 3
base=""
if [ "$1" != "--" ]; then base=$1; shift; fi
[ "${1:-}" = "--" ] || { echo "env-sweep: expected -- before attention_bench's arguments" >&2; exit 2; }
shift
out=${OUT:-build-device/out}
mkdir -p "$out"
# The device tool brings back at most 8 files: on exit all but sweep.md go into sweep-logs.tar.gz.
OUTDIR=$out
source "$(dirname "${BASH_SOURCE[0]}")/device-out.sh"
trap 'pack_out sweep-logs.tar.gz sweep.md' EXIT
files=()
for v in $values; do
  f="$out/sweep-$var-$v.jsonl"
  env "$var=$v" "$bench" "$@" >"$f" 2>"$out/sweep-$var-$v.log"
  echo "[env-sweep] $var=$v exit $? ($(grep -cE '"kind": ?"result"' "$f") results)"
  files+=("$v=$f")
done
if [ -n "$base" ]; then
  "$base" "$@" >"$out/sweep-base.jsonl" 2>"$out/sweep-base.log"
  echo "[env-sweep] base exit $?"
  files+=("base=$out/sweep-base.jsonl")
fi
python3 - "$var" "${files[@]}" >"$out/sweep.md" <<'PY'
import json, sys
var, runs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
table, cases = {}, []
for label, path in runs:
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r.get("kind") != "result":
            continue
        key = (r["pass"], r["dim"], r["seq"], r["causal"], r["mode"], r.get("exp", ""), r["probe"])
        if key not in table:
            table[key] = {}
            cases.append(key)
        table[key][label] = r["tflops"]
labels = [l for l, _ in runs]
print(f"TFLOP/s per {var} value (median of the timed calls); * the fastest of the values")
print()
print("| pass | D | S | causal | mode | " + " | ".join(labels) + " |")
print("|---|---:|---:|---|---|" + "---:|" * len(labels))
for k in cases:
    vals = {l: table[k].get(l) for l in labels}
    tuned = [vals[l] for l in labels if l != "base" and vals[l] is not None]
    best = max(tuned) if tuned else None
    cells = [("—" if vals[l] is None else f"{vals[l]:.0f}" + ("*" if l != "base" and vals[l] == best else "")) for l in labels]
    mode = k[4] + (" " + k[5] if k[5] else "") + (" +probe" if k[6] else "")
    print(f"| {k[0]} | {k[1]} | {k[2]} | {'yes' if k[3] else 'no'} | {mode} | " + " | ".join(cells) + " |")
PY
cat "$out/sweep.md"
