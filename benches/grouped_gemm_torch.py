"""torch._grouped_mm on the row counts benches/grouped_gemm.rs wrote (GROUPED_COUNTS, JSON), on
the GPU machine in the same call. Forward: bf16 A [rows][K] (the routed rows back to back),
B [G][N][K], out = A_g @ B_g^T per group (offs: the groups' ends, a 2-D x 3-D call). Weight
gradient (ragged K): dY [T][N] and X [T][K] over the same counts, out [G][N][K] with
out[g] = dY_g^T @ X_g (a 2-D x 2-D call, offs along the tokens: dY.t() is a column-major
[N][T] view, as torch's own backward passes it). Median of 20 CUDA-event-timed samples of 5
calls back to back after 5 warm-ups and BENCH_WARM_MS (500) ms of calls (as the Rust bench
times tma and the cuBLAS loop); TFLOP/s = 2 * rows * N * K / median. Prints one table row a problem.
GROUPED_MODE=forward or wgrad runs one of the two (default: both). Written for torch 2.11; a
torch without _grouped_mm or refusing a call prints why and skips that table."""
import json
import os
import sys

import torch

from torch_timing import timed

LAUNCHES = 5  # calls per timed sample, back to back (as benches/grouped_gemm.rs times tma)


def uniform(*shape):
    """Uniform in [-1, 1), as the Rust bench fills its operands (the same values' range, so the
    same power draw and clocks)."""
    return (torch.rand(*shape, device="cuda") * 2 - 1).to(torch.bfloat16)


def forward(problems):
    print("| groups | rows | N | K | routing | torch._grouped_mm TFLOP/s | ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for p in problems:
        g, n, k, counts = p["groups"], p["n"], p["k"], p["counts"]
        rows = sum(counts)
        a = uniform(max(rows, 1), k)
        b = uniform(g, n, k)
        offs = torch.tensor(counts, device="cuda", dtype=torch.int32).cumsum(0).to(torch.int32)
        bt = b.transpose(-2, -1)
        f = lambda: torch._grouped_mm(a[:rows], bt, offs=offs)
        # One check: a non-empty group against a plain matmul (none when every group is empty).
        ref_g = next((i for i, c in enumerate(counts) if c > 0), None)
        err = float("nan")
        if ref_g is not None:
            start = sum(counts[:ref_g])
            got = f()[start:start + counts[ref_g]].float()
            want = (a[start:start + counts[ref_g]].float() @ b[ref_g].float().T)
            err = ((got - want).abs().max() / want.abs().max()).item()
        ms = timed(f, launches=LAUNCHES)
        tf = 2 * rows * n * k / (ms * 1e-3) / 1e12
        print(f"| {g} | {rows} | {n} | {k} | {p['routing']} | {tf:.0f} | {ms:.3f} | (check {err:.1e})")


def wgrad(problems):
    print("| groups | tokens | N | K | routing | torch._grouped_mm wgrad TFLOP/s | ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for p in problems:
        g, n, k, counts = p["groups"], p["n"], p["k"], p["counts"]
        tokens = sum(counts)
        dy = uniform(max(tokens, 1), n)[:tokens]
        x = uniform(max(tokens, 1), k)[:tokens]
        offs = torch.tensor(counts, device="cuda", dtype=torch.int32).cumsum(0).to(torch.int32)
        dyt = dy.t()
        f = lambda: torch._grouped_mm(dyt, x, offs=offs)
        try:
            out = f()
        except (RuntimeError, TypeError, ValueError) as e:
            print(f"skipped: torch._grouped_mm refused the 2-D x 2-D (ragged K) call: {e}".splitlines()[0])
            return
        if tuple(out.shape) != (g, n, k):
            print(f"skipped: torch._grouped_mm's ragged-K output is {tuple(out.shape)}, not ({g}, {n}, {k})")
            return
        # One check: a non-empty group against a plain matmul; the empty groups' outputs zero?
        ref_g = next((i for i, c in enumerate(counts) if c > 0), None)
        err = float("nan")
        if ref_g is not None:
            start = sum(counts[:ref_g])
            want = dy[start:start + counts[ref_g]].float().T @ x[start:start + counts[ref_g]].float()
            err = ((out[ref_g].float() - want).abs().max() / want.abs().max()).item()
        empty = [i for i, c in enumerate(counts) if c == 0]
        zeros = all(bool((out[i] == 0).all()) for i in empty)
        ms = timed(f, launches=LAUNCHES)
        tf = 2 * tokens * n * k / (ms * 1e-3) / 1e12
        print(f"| {g} | {tokens} | {n} | {k} | {p['routing']} | {tf:.0f} | {ms:.3f} | (check {err:.1e}; "
              f"{len(empty)} empty groups {'zero' if zeros else 'NOT zero'})")


def main():
    path = os.environ.get("GROUPED_COUNTS", sys.argv[1] if len(sys.argv) > 1 else "")
    problems = json.load(open(path))
    mode = os.environ.get("GROUPED_MODE", "")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    if not hasattr(torch, "_grouped_mm"):
        print(f"skipped: torch {torch.__version__} has no torch._grouped_mm (torch 2.8 or later, sm_90)")
        return
    if mode != "wgrad":
        forward(problems)
    if mode != "forward":
        print()
        wgrad(problems)


main()
