#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes a, b, d of PyTorch's bf16 matrix product (cuBLAS) as safetensors for `tiebreak audit-gemm`.

    tools/gemm-torch-dump.py OUT_DIR [--shapes 4096x4096x4096,1024x1024x8192] [--seed 1]
                             [--fp8-shapes 1024x1024x8192]

For each shape MxNxK: a [M, K] and b [K, N] are bf16, N(0, 1) values from a seeded CPU generator
(the same bits on every machine), moved to the GPU. Files, per shape:
  torch_bf16_<M>x<N>x<K>.safetensors        d = torch.matmul(a, b)            (bf16 output, defaults)
  torch_bf16_noreduced_<M>x<N>x<K>.safetensors  the same with
      torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
  torch_bf16_f32out_<M>x<N>x<K>.safetensors d = torch.mm(a, b, out_dtype=torch.float32), when this
      torch supports out_dtype (f32 output: the accumulator itself, no final bf16 rounding)
and, per --fp8-shapes shape (FP8 e4m3 through torch._scaled_mm; a and b are the bf16 values divided
by their scale, amax / 448, rounded by torch to e4m3; b is stored [K, N] row-major; skipped with a
line in torch-info.txt where this torch or device refuses):
  torch_fp8_tensor_f32out[_fastaccum]_<M>x<N>x<K>.safetensors  per-tensor scales (shape []), f32 D,
      use_fast_accum False / True
  torch_fp8_row_bf16out[_fastaccum]_<M>x<N>x<K>.safetensors    scale_a [M, 1], scale_b [1, N], bf16 D
and torch-info.txt (torch and CUDA versions, the device, the flags). Needs only torch (no
safetensors package: the writer below is 20 lines). Then, for each file:
    tiebreak audit-gemm FILE --identify -o FILE.json
"""
import json
import struct
import sys
from pathlib import Path

import torch

DTYPES = {torch.bfloat16: ("BF16", torch.int16), torch.float32: ("F32", torch.int32)}
if hasattr(torch, "float8_e4m3fn"):
    DTYPES[torch.float8_e4m3fn] = ("F8_E4M3", torch.uint8)
NP_TYPES = {torch.int16: "<i2", torch.int32: "<i4", torch.uint8: "<u1"}


def write_safetensors(path, tensors):
    """tensors: name -> CPU tensor (bf16 or f32), written little-endian in name order."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous().cpu()
        dtype, view = DTYPES[t.dtype]
        raw = t.view(view).numpy().astype(NP_TYPES[view]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def fp8_dumps(out, dev, shape, seed):
    """torch._scaled_mm on e4m3 operands: per-tensor scales (f32 D) and row-wise scales (bf16 D)."""
    M, N, K = (int(x) for x in shape.split("x"))
    e4m3 = torch.float8_e4m3fn
    g = torch.Generator().manual_seed(seed + 1)
    a = torch.randn(M, K, generator=g)
    b = torch.randn(K, N, generator=g)
    tag, info = f"{M}x{N}x{K}", []
    sa = (a.abs().amax() / 448).float()
    sb = (b.abs().amax() / 448).float()
    a8, b8 = (a / sa).to(e4m3), (b / sb).to(e4m3)
    ad, bd = a8.to(dev), b8.to(dev).t().contiguous().t()  # b column-major, as _scaled_mm wants
    for fast in (False, True):
        d = torch._scaled_mm(ad, bd, scale_a=sa.to(dev), scale_b=sb.to(dev), out_dtype=torch.float32, use_fast_accum=fast)
        torch.cuda.synchronize()
        name = f"torch_fp8_tensor_f32out{'_fastaccum' if fast else ''}_{tag}.safetensors"
        write_safetensors(out / name, {"a": a8, "b": b8, "d": d, "scale_a": sa, "scale_b": sb})
        info.append(f"{tag}: {name} written")
    ra = (a.abs().amax(dim=1, keepdim=True) / 448).float()  # [M, 1]
    rb = (b.abs().amax(dim=0, keepdim=True) / 448).float()  # [1, N]
    a8, b8 = (a / ra).to(e4m3), (b / rb).to(e4m3)
    ad, bd = a8.to(dev), b8.to(dev).t().contiguous().t()
    for fast in (False, True):
        try:
            d = torch._scaled_mm(ad, bd, scale_a=ra.to(dev), scale_b=rb.to(dev), out_dtype=torch.bfloat16, use_fast_accum=fast)
            torch.cuda.synchronize()
        except (TypeError, RuntimeError) as e:
            info.append(f"{tag}: row-wise _scaled_mm (fast accum {fast}) not available: {e}")
            continue
        name = f"torch_fp8_row_bf16out{'_fastaccum' if fast else ''}_{tag}.safetensors"
        write_safetensors(out / name, {"a": a8, "b": b8, "d": d, "scale_a": ra, "scale_b": rb})
        info.append(f"{tag}: {name} written")
    return info


def main(argv):
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    shapes, seed, fp8_shapes = "4096x4096x4096,1024x1024x8192", 1, "1024x1024x8192"
    it = iter(argv[1:])
    for a in it:
        if a == "--shapes":
            shapes = next(it)
        elif a == "--seed":
            seed = int(next(it))
        elif a == "--fp8-shapes":
            fp8_shapes = next(it)
        else:
            print(f"gemm-torch-dump: unknown option {a}", file=sys.stderr)
            return 2
    if not torch.cuda.is_available():
        print("gemm-torch-dump: no CUDA device", file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    info = [f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuBLAS via torch.matmul",
            f"device {torch.cuda.get_device_name(0)}",
            f"allow_bf16_reduced_precision_reduction default "
            f"{torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction}"]
    for shape in shapes.split(","):
        M, N, K = (int(x) for x in shape.split("x"))
        g = torch.Generator().manual_seed(seed)
        a = torch.randn(M, K, generator=g).to(torch.bfloat16)
        b = torch.randn(K, N, generator=g).to(torch.bfloat16)
        ad, bd = a.to(dev), b.to(dev)
        tag = f"{M}x{N}x{K}"
        default = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
        d = torch.matmul(ad, bd)
        torch.cuda.synchronize()
        write_safetensors(out / f"torch_bf16_{tag}.safetensors", {"a": a, "b": b, "d": d})
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        d = torch.matmul(ad, bd)
        torch.cuda.synchronize()
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = default
        write_safetensors(out / f"torch_bf16_noreduced_{tag}.safetensors", {"a": a, "b": b, "d": d})
        try:
            d = torch.mm(ad, bd, out_dtype=torch.float32)
            torch.cuda.synchronize()
            write_safetensors(out / f"torch_bf16_f32out_{tag}.safetensors", {"a": a, "b": b, "d": d})
        except (TypeError, RuntimeError) as e:
            info.append(f"{tag}: torch.mm(out_dtype=float32) not available: {e}")
        info.append(f"{tag}: written")
    for shape in [x for x in fp8_shapes.split(",") if x]:
        try:
            info += fp8_dumps(out, dev, shape, seed)
        except Exception as e:  # an FP8 path this torch or device lacks: say so, keep the bf16 files
            info.append(f"{shape}: FP8 torch._scaled_mm not available: {type(e).__name__}: {e}")
    (out / "torch-info.txt").write_text("\n".join(info) + "\n")
    print("\n".join(info))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
