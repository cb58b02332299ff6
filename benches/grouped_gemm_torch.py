"""torch._grouped_mm on the row counts benches/grouped_gemm.rs wrote (GROUPED_COUNTS, JSON), on
the GPU machine in the same call: bf16 A [rows][K] (the routed rows back to back), B [G][N][K],
out = A_g @ B_g^T per group (offs: the groups' ends). Median of 20 CUDA-event-timed calls
after 5 warm-ups; TFLOP/s = 2 * rows * N * K / median. Prints one table row a problem."""
import json
import os
import statistics
import sys

import torch


def main():
    path = os.environ.get("GROUPED_COUNTS", sys.argv[1] if len(sys.argv) > 1 else "")
    problems = json.load(open(path))
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print("| groups | rows | N | K | routing | torch._grouped_mm TFLOP/s | ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for p in problems:
        g, n, k, counts = p["groups"], p["n"], p["k"], p["counts"]
        rows = sum(counts)
        a = torch.randn(max(rows, 1), k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(g, n, k, device="cuda", dtype=torch.bfloat16)
        offs = torch.tensor(counts, device="cuda", dtype=torch.int32).cumsum(0).to(torch.int32)
        bt = b.transpose(-2, -1)
        f = lambda: torch._grouped_mm(a[:rows], bt, offs=offs)
        # One check: a non-empty group against a plain matmul.
        ref_g = next(i for i, c in enumerate(counts) if c > 0)
        start = sum(counts[:ref_g])
        got = f()[start:start + counts[ref_g]].float()
        want = (a[start:start + counts[ref_g]].float() @ b[ref_g].float().T)
        err = ((got - want).abs().max() / want.abs().max()).item()
        for _ in range(5):
            f()
        times = []
        for _ in range(20):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            f()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        ms = statistics.median(times)
        tf = 2 * rows * n * k / (ms * 1e-3) / 1e12
        print(f"| {g} | {rows} | {n} | {k} | {p['routing']} | {tf:.0f} | {ms:.3f} | (check {err:.1e})")


main()
