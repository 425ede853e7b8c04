#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Speed-of-light, memory and compute sections of the tiebreak bf16 forward (sfu, probe off) and of
# SDPA's flash forward at the same shape, for comparison (issue 18). Run after device-check built
# attention_bench. Output: $OUT/ncu-sol.txt
set -uo pipefail
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
ab=${TIEBREAK_DEVICE_BUILD:-build-device}/full/bench/attention_bench
o=${OUT:-/tmp}/ncu-sol.txt
secs="--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section Occupancy --section WarpStateStats --section InstructionStats"
timeout 150 "$ncu" $secs -k regex:flash_forward -c 1 "$ab" --seqs 4096 --modes bf16 --probe off --exp sfu --passes fwd --warmup 0 --reps 1 >"$o" 2>&1
cat >/tmp/sdpa1.py <<'PY'
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    F.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
PY
timeout 150 "$ncu" $secs -k regex:flash_fwd -c 1 python3 /tmp/sdpa1.py >>"$o" 2>&1
echo "ncu-sol done" >>"$o"
