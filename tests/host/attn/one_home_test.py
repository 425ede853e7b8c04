#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The attention problem's rules have one home: include/tiebreak/attn/problem.hpp.

Scans the library's code (include/, src/, cuda/, analysis/, testing/, bench/, examples/; comments
stripped) for arithmetic that restates
  - the causal mask rule: seq_q and seq_k combined by + or - on one line (j + seq_q <= i + seq_k,
    i + seq_k + 1 - seq_q, k0 + seq_q - seq_k, ...);
  - the grouped-query mapping: heads / kv_heads (the group size, h / (heads / kv_heads));
  - the shape validation: heads % kv_heads;
and fails, naming file and line, for any such line outside include/tiebreak/attn/. tests/ is not
scanned: test oracles restate the rules on purpose (docs/testing.md: an oracle written
independently of the code it checks).

`--self-test` first checks that the patterns flag the forms the rules had before they moved
(so this test can fail) and pass the calls that replaced them.
"""
import pathlib
import re
import sys

HOME = pathlib.PurePosixPath("include/tiebreak/attn")
SCANNED = ("include", "src", "cuda", "analysis", "testing", "bench", "examples")
SUFFIXES = {".hpp", ".cpp", ".cu", ".cuh", ".h"}

SEQ = r"\bseq_[qk]\b"
ADDITIVE = re.compile(r"\bseq_[qk]\b\s*[-+](?![-+=])|(?<![-+])[-+]\s*(?:[\w.>\-]*?(?:\.|->))?seq_[qk]\b")
GROUP = re.compile(r"\bheads\s*/\s*(?:[\w.]*(?:\.|->))?kv_heads\b")
DIVIDES = re.compile(r"\bheads\s*%\s*(?:[\w.]*(?:\.|->))?kv_heads\b")


def strip_comments(text):
    """Removes // and /* */ comments (string literals with // do not occur in the rules' code)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return [re.sub(r"//.*", "", line) for line in text.split("\n")]


def offences(line):
    """The rules a code line restates (empty list: none)."""
    found = []
    if re.search(r"\bseq_q\b", line) and re.search(r"\bseq_k\b", line) and ADDITIVE.search(line):
        found.append("causal mask rule (seq_q/seq_k arithmetic)")
    if GROUP.search(line):
        found.append("grouped-query mapping (heads / kv_heads)")
    if DIVIDES.search(line):
        found.append("shape validation (heads % kv_heads)")
    return found


def scan(root):
    bad = []
    for top in SCANNED:
        base = root / top
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            rel = pathlib.PurePosixPath(path.relative_to(root).as_posix())
            if rel.is_relative_to(HOME):
                continue
            for n, line in enumerate(strip_comments(path.read_text(encoding="utf-8", errors="replace")), 1):
                for what in offences(line):
                    bad.append(f"{rel}:{n}: {what}: {line.strip()}")
    return bad


# The rule as it was written before include/tiebreak/attn/ existed (must be flagged) ...
OLD_FORMS = [
    "  return !causal || j + s.seq_q <= i + s.seq_k;",
    "  return lim <= s.seq_q ? 0 : std::min(s.seq_k, lim - s.seq_q);",
    "  const long lim = static_cast<long>(i) + p.seq_k + 1 - p.seq_q;",
    "  long first = p.causal ? static_cast<long>(k0) + p.seq_q - p.seq_k : 0;",
    "  pr[a][c] = in ? prob(d, p.scale, ms[qi], ls[qi], !p.causal || static_cast<long>(j) + p.seq_q <= static_cast<long>(i) + p.seq_k) : 0.0;",
    "  const int bkv = b * p.kv_heads + h / (p.heads / p.kv_heads);",
    "    const std::size_t group = s.heads / s.kv_heads;",
    "  [[nodiscard]] std::size_t kv_head_of(std::size_t h) const noexcept { return h / (heads / kv_heads); }",
    "    return batch && heads && kv_heads && seq_q && seq_k && dim && dim_v && heads % kv_heads == 0;",
    "  if (!in.batch || !in.heads || !in.seq_k || in.heads % in.kv_heads)",
    "          const std::size_t n = causal ? (i + s.seq_k + 1 <= s.seq_q ? 0 : std::min(s.seq_k, i + s.seq_k + 1 - s.seq_q)) : s.seq_k;",
]
# ... and code that only uses sizes (must pass).
NEW_FORMS = [
    "  const std::size_t work = s.batch * s.heads * s.seq_q * s.seq_k * std::max(s.dim, s.dim_v);",
    "  if (in.seq_q > (1u << 30) || in.seq_k > (1u << 30))",
    "  forward_kernel<T><<<dim3((p.seq_q + T::rows - 1) / T::rows, bh), block, fs, st>>>(p);",
    "    const std::size_t n = pr.visible_keys(i);",
    "  const std::size_t bkv = s.kv_row(b, s.kv_head(h), 0);",
    "  j[\"shape\"] = {{\"batch\", s.batch}, {\"heads\", s.heads}, {\"kv_heads\", s.kv_heads}, {\"seq_q\", s.seq_q},",
    "  const std::size_t total = r.heads.size() + s.batch * s.kv_heads;",
    "  if (reduced_sizes() && c.s.seq_q * c.s.seq_k > 100000) GTEST_SKIP();",
]


def self_test():
    ok = True
    for line in OLD_FORMS:
        if not offences(line):
            print(f"self-test: not flagged: {line.strip()}")
            ok = False
    for line in NEW_FORMS:
        if offences(line):
            print(f"self-test: wrongly flagged ({offences(line)}): {line.strip()}")
            ok = False
    if strip_comments("x = 1; // j + seq_q <= i + seq_k\n/* heads / kv_heads\n */ y")[0] != "x = 1; ":
        print("self-test: comments not stripped")
        ok = False
    return ok


def main(argv):
    args = [a for a in argv[1:] if a != "--self-test"]
    if len(args) != 1:
        print(f"usage: {argv[0]} [--self-test] SOURCE_ROOT")
        return 2
    if "--self-test" in argv and not self_test():
        return 1
    root = pathlib.Path(args[0])
    if not (root / HOME / "problem.hpp").is_file():
        print(f"{root}: no {HOME}/problem.hpp")
        return 2
    bad = scan(root)
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} line(s) restate a rule of {HOME}/problem.hpp: call it instead")
        return 1
    print(f"the mask rule, the grouped-query mapping and the shape validation live only in {HOME}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
