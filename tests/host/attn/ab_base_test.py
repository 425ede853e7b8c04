#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tools/ab-base.sh: the base tree of a before/after benchmark is commit REF's tracked files, with
the commit's short name beside them; a name that is no commit, or a folder that is not an earlier
export, is refused with exit 2; --fingerprint names a tree's files and contents, not its dates.
    ab_base_test.py REPO_ROOT      exit 0: passed; 1: failed; 77: skipped (no git, or not a clone)"""
import os
import shutil
import subprocess
import sys
import tempfile


def main(root):
    if shutil.which("git") is None or subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True).returncode:
        print("ab_base_test: skipped (no git, or %s is not a git clone)" % root)
        return 77
    script = os.path.join(root, "tools", "ab-base.sh")
    fails = []
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "base")
        p = subprocess.run(["bash", script, "HEAD", out], capture_output=True, text=True)
        sha = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        tracked = subprocess.run(["git", "-C", root, "ls-tree", "-r", "--name-only", "HEAD"], capture_output=True,
                                 text=True).stdout.split("\n")[:-1]
        got = sorted(os.path.relpath(os.path.join(dp, f), out) for dp, _, fs in os.walk(out) for f in fs)
        if p.returncode != 0:
            fails.append("exit %d: %s" % (p.returncode, p.stderr.strip()))
        if open(os.path.join(out, ".ab-base-ref")).read().strip() != sha:
            fails.append(".ab-base-ref is not %s" % sha)
        if sorted(tracked + [".ab-base-ref"]) != got:
            fails.append("the tree is not HEAD's tracked files (%d files, %d tracked)" % (len(got), len(tracked)))
        if "TIEBREAK_ATTN_BENCH_BASE" not in p.stdout:
            fails.append("no hint how to use it: %r" % p.stdout)
        # A second export into the same folder replaces the first (no stale files).
        with open(os.path.join(out, "stale"), "w") as f:
            f.write("x")
        subprocess.run(["bash", script, "HEAD", out], capture_output=True)
        if os.path.exists(os.path.join(out, "stale")):
            fails.append("a stale file survived a second export")
        # The fingerprint names files and contents, not times: the same export twice gives the same
        # line; one changed byte under the old date (what git archive does) gives another.
        fp = lambda: subprocess.run(["bash", script, "--fingerprint", out], capture_output=True, text=True).stdout.strip()
        a = fp()
        subprocess.run(["bash", script, "HEAD", out], capture_output=True)
        if fp() != a or len(a) != 40:
            fails.append("the fingerprint of one commit's export changed, or is not a sha1: %r" % a)
        cm = os.path.join(out, "CMakeLists.txt")
        st = os.stat(cm)
        with open(cm, "a") as f:
            f.write("# one more line\n")
        os.utime(cm, ns=(st.st_atime_ns, st.st_mtime_ns))
        if fp() == a:
            fails.append("a changed file under its old date kept the fingerprint")
        if subprocess.run(["bash", script, "--fingerprint", os.path.join(d, "none")], capture_output=True).returncode != 2:
            fails.append("--fingerprint of a missing folder did not exit 2")
        # A folder that is not an earlier export is never removed.
        keep = os.path.join(d, "keep")
        os.makedirs(keep)
        with open(os.path.join(keep, "precious"), "w") as f:
            f.write("x")
        p = subprocess.run(["bash", script, "HEAD", keep], capture_output=True, text=True)
        if p.returncode != 2 or not os.path.exists(os.path.join(keep, "precious")) or "not an earlier export" not in p.stderr:
            fails.append("a foreign folder: exit %d, %r" % (p.returncode, p.stderr))
        p = subprocess.run(["bash", script, "no-such-ref-xyz", os.path.join(d, "bad")], capture_output=True, text=True)
        if p.returncode != 2 or "is not a commit" not in p.stderr:
            fails.append("bad ref: exit %d, %r" % (p.returncode, p.stderr))
    for f in fails:
        print("ab_base_test FAILED: " + f, file=sys.stderr)
    print("ab_base_test: %d failures" % len(fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))))
