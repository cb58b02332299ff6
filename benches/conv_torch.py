"""cuDNN (torch.nn.functional.conv2d) on the layers benches/conv.rs timed, on the GPU machine in
the same call: reads CONV_JSON (default target/conv.json), bf16 NHWC (channels_last) input
[N][C][H][W] and filter [K][C][R][S], torch.backends.cudnn.benchmark = True; median of 20
CUDA-event-timed samples of 10 calls back to back (as benches/conv.rs times tma: the host's
launch gaps are not GPU time) after 5 warm-up calls (the first picks the algorithm) and
BENCH_WARM_MS (500) ms of calls (torch_timing.timed); TFLOP/s =
2 * N * P * Q * K * R * S * C / median. Prints the table with tma's numbers and the ratio
tma / cuDNN. Usage: python3 benches/conv_torch.py [conv.json]"""
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F

from torch_timing import timed


def main():
    path = os.environ.get("CONV_JSON", sys.argv[1] if len(sys.argv) > 1 else "target/conv.json")
    layers = json.load(open(path))
    torch.backends.cudnn.benchmark = True
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    print("| layer | cuDNN TFLOP/s | cuDNN ms | tma TFLOP/s | tma ms | tma / cuDNN | tma config |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ratios = []
    for l in layers:
        n, hw, c, k, r, pad, stride = l["n"], l["hw"], l["c"], l["k"], l["r"], l["pad"], l["stride"]
        x = torch.randn(n, c, hw, hw, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
        w = torch.randn(k, c, r, r, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
        f = lambda: F.conv2d(x, w, stride=stride, padding=pad)
        y = f()
        p = y.shape[2]
        # One check against fp32 on a slice of the batch.
        want = F.conv2d(x[:2].float(), w.float(), stride=stride, padding=pad)
        err = ((y[:2].float() - want).abs().max() / want.abs().max()).item()
        ms = timed(f, launches=10)
        flops = 2 * n * p * p * k * r * r * c
        tf = flops / (ms * 1e-3) / 1e12
        ratio = l["tma_tflops"] / tf
        ratios.append(ratio)
        print(
            f"| {l['layer']} | {tf:.0f} | {ms:.3f} | {l['tma_tflops']:.0f} | {l['tma_ms']:.3f} | {ratio:.2f}x | {l['config']} | (cuDNN check {err:.1e})"
        )
    if ratios:
        print(f"geomean tma / cuDNN: {statistics.geometric_mean(ratios):.2f}x")


main()
