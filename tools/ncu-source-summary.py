#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Summarises Nsight Compute's source page (`ncu -i R --page source --print-source sass --csv`) of
the attention kernels: per kernel, the warp-stall samples and executed warp instructions of the code
before the tile loop, the loop and the code after it (the loop: the last backward branch whose body
holds tensor-core instructions, HMMA or wgmma's HGMMA), the loop's and the epilogue's top opcodes and stall reasons,
and the instructions with the most samples. The page is megabytes per kernel; this is what
`tools/device-check.sh attn-ncu` keeps of it (TIEBREAK_NCU_SOURCE=1).

  tools/ncu-source-summary.py SOURCE.csv [--top N]
"""
import argparse
import collections
import csv
import re
import sys


def tables(path):
    """The source page's tables: [{'name', 'header', 'rows'}] in file order."""
    out, cur = [], None
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "Kernel Name":
                cur = {"name": row[1], "header": None, "rows": []}
                out.append(cur)
            elif row[0] == "Address" and cur is not None:
                cur["header"] = row
            elif cur is not None and cur["header"] and row[0].startswith("0x"):
                cur["rows"].append(row)
    return [t for t in out if t["header"] and t["rows"]]


def as_int(s):
    try:
        return int(s.replace(",", "")) if s not in ("", "-") else 0
    except ValueError:
        return 0


def opcode(text):
    words = text.split()
    if not words:
        return "?"
    w = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return w.split(".")[0]


def tensor_core(text):
    """A tensor-core instruction: mma.sync's HMMA or wgmma's HGMMA (sm_90a)."""
    return "HMMA" in text or "HGMMA" in text


def summarise(t, top):
    h = t["header"]
    ia, isrc = h.index("Address"), h.index("Source")
    isamp = h.index("Warp Stall Sampling (All Samples)")
    iex = h.index("Instructions Executed")
    stall_cols = [i for i, x in enumerate(h) if x.startswith("stall_") and "Not Issued" not in x]
    base = int(t["rows"][0][ia], 16)
    ins = []
    for r in t["rows"]:
        ins.append({
            "addr": int(r[ia], 16) - base,
            "text": r[isrc].strip(),
            "samples": as_int(r[isamp]),
            "executed": as_int(r[iex]),
            "stalls": {h[i][len("stall_"):]: as_int(r[i]) for i in stall_cols},
        })
    loop = None
    for x in ins:
        if "BRA" not in x["text"]:
            continue
        m = re.search(r"0x([0-9a-f]+)", x["text"].split("BRA", 1)[1])
        if not m:
            continue
        target = int(m.group(1), 16) - base
        if target < x["addr"] and any(tensor_core(y["text"]) for y in ins if target <= y["addr"] <= x["addr"]):
            loop = (target, x["addr"])
    print(f"## {t['name']}")
    print(f"{len(ins)} SASS instructions" + (f"; tile loop {loop[0]:#x}-{loop[1]:#x}" if loop else "; no tile loop found"))
    if not loop:
        return
    parts = [("before the loop", lambda a: a < loop[0]), ("loop", lambda a: loop[0] <= a <= loop[1]),
             ("after the loop", lambda a: a > loop[1])]
    total = sum(x["samples"] for x in ins) or 1
    for name, inside in parts:
        sel = [x for x in ins if inside(x["addr"])]
        samples = sum(x["samples"] for x in sel)
        stalls = collections.Counter()
        ops_s, ops_e = collections.Counter(), collections.Counter()
        for x in sel:
            stalls.update(x["stalls"])
            ops_s[opcode(x["text"])] += x["samples"]
            ops_e[opcode(x["text"])] += x["executed"]
        never = sum(1 for x in sel if x["executed"] == 0)
        print(f"- {name}: {len(sel)} instructions ({never} never executed), {samples} samples "
              f"({100 * samples / total:.1f} %), {sum(x['executed'] for x in sel)} warp instructions executed")
        print("  stalls: " + ", ".join(f"{k} {v}" for k, v in stalls.most_common(6) if v))
        print("  opcodes (samples / executed): " +
              ", ".join(f"{k} {v}/{ops_e[k]}" for k, v in ops_s.most_common(10)))
    print(f"- top {top} instructions by samples:")
    for x in sorted(ins, key=lambda y: -y["samples"])[:top]:
        main = max(x["stalls"].items(), key=lambda kv: kv[1], default=("", 0))
        print(f"  {x['addr']:#07x} {x['samples']:6d} {x['executed']:10d}  {main[0]:<16} {x['text']}")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    ts = tables(a.csv)
    if not ts:
        print(f"{a.csv}: no source tables (was it written with --page source --print-source sass --csv?)",
              file=sys.stderr)
        return 1
    seen = set()
    for t in ts:  # ncu repeats a kernel's table per launch: the first of each name
        if t["name"] in seen:
            continue
        seen.add(t["name"])
        summarise(t, a.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
