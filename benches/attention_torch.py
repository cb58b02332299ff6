"""cuDNN SDPA and FlashAttention-2 (torch's flash backend) on the problems benches/attention.rs
timed (ATTN_RESULTS, JSON, written by it in the same device call), with tma's numbers beside
them: bf16 or f16 Q, K, V as [B][H][S][D] contiguous (the layout tma's kernel reads),
is_causal as the problem says. Each backend selected explicitly (sdpa_kernel); median of 20
CUDA-event-timed samples of 5 calls back to back (as benches/attention.rs times tma) after 5
warm-ups and BENCH_WARM_MS (500) ms of calls back to back (the clocks settle under the power
cap, as the Rust bench does); TFLOP/s = 4 B H S^2 D /
median, halved for causal.
One check per problem: each backend's output against the math backend in f32 on one head.
Prints one markdown table."""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_timing import timed


def main():
    path = os.environ.get("ATTN_RESULTS", sys.argv[1] if len(sys.argv) > 1 else "")
    rows = json.load(open(path))
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    print("| config | B | H | S | D | causal | tma TFLOP/s | cuDNN TFLOP/s | tma / cuDNN | FA2 TFLOP/s | tma / FA2 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    torch.manual_seed(0)
    for r in rows:
        b, h, s, d, causal = r["b"], r["h"], r["s"], r["d"], r["causal"]
        dt = torch.bfloat16 if r["dtype"] == "bf16" else torch.float16
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dt) for _ in range(3))
        flops = 4 * b * h * s * s * d / (2 if causal else 1)
        ref = None
        out = {}
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
            try:
                with sdpa_kernel([backend]):
                    f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    got = f()
                    if ref is None:
                        with sdpa_kernel([SDPBackend.MATH]):
                            ref = F.scaled_dot_product_attention(
                                q[:1, :1].float(), k[:1, :1].float(), v[:1, :1].float(), is_causal=causal)
                    err = (got[:1, :1].float() - ref).abs().max().item()
                    if err > 0.05:
                        out[name] = f"wrong ({err:.1e})"
                        continue
                    out[name] = flops / (timed(f) * 1e-3) / 1e12
            except Exception as e:  # a backend that refuses the shape
                out[name] = f"n/a ({type(e).__name__})"
        tma = r["tflops"]

        def ratio(x):
            return f"{tma / x:.2f}x" if isinstance(x, float) else "-"

        def show(x):
            return f"{x:.0f}" if isinstance(x, float) else x

        print(f"| {r['config']} | {b} | {h} | {s} | {d} | {causal} | {tma:.0f} | {show(out['cudnn'])} | "
              f"{ratio(out['cudnn'])} | {show(out['fa2'])} | {ratio(out['fa2'])} |")


main()
