"""torch._grouped_mm on the row counts benches/grouped_gemm.rs wrote (GROUPED_COUNTS, JSON), on
the GPU machine in the same call. Forward: bf16 A [rows][K] (the routed rows back to back),
B [G][N][K], out = A_g @ B_g^T per group (offs: the groups' ends, a 2-D x 3-D call). Weight
gradient (ragged K): dY [T][N] and X [T][K] over the same counts, out [G][N][K] with
out[g] = dY_g^T @ X_g (a 2-D x 2-D call, offs along the tokens: dY.t() is a column-major
[N][T] view, as torch's own backward passes it). Median of 20 CUDA-event-timed samples of 5
calls back to back after 5 warm-ups and BENCH_WARM_MS (500) ms of calls (as the Rust bench
times tma and the cuBLAS loop); TFLOP/s = 2 * rows * N * K / median. Prints one table row a problem.
GROUPED_MODE=forward or wgrad runs one of the two (default: both). Written for torch 2.11; a
torch without _grouped_mm or refusing a call prints why and skips that table.

Then the memory ceiling of each problem: the bytes it must move at least (every operand read
once, the output written once), at the best read and write rates measured on this GPU in this
call (a sum over 2 GiB of bf16, a fill of 2 GiB; a copy of 1 GiB for reference), gives the
fastest a kernel can run it: time >= read / read rate + write / write rate (HBM's data bus is
shared by reads and writes), and so the TFLOP/s no kernel exceeds, beside torch's and 1.3x
torch's (issue 26's goal); and the same at the H100 SXM's data-sheet 3.35 TB/s for every byte
(HBM3_SPEC), a ceiling no kernel reaches."""
import json
import os
import sys

import torch

from torch_timing import timed

LAUNCHES = 5  # calls per timed sample, back to back (as benches/grouped_gemm.rs times tma)
HBM3_SPEC = 3.35e12  # bytes/s: the H100 SXM5 80 GB's data-sheet memory bandwidth


def uniform(*shape):
    """Uniform in [-1, 1), as the Rust bench fills its operands (the same values' range, so the
    same power draw and clocks)."""
    return (torch.rand(*shape, device="cuda") * 2 - 1).to(torch.bfloat16)


def forward(problems, torch_tf):
    print("| groups | rows | N | K | routing | torch._grouped_mm TFLOP/s | ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for i, p in enumerate(problems):
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
        torch_tf[("forward", i)] = tf
        print(f"| {g} | {rows} | {n} | {k} | {p['routing']} | {tf:.0f} | {ms:.3f} | (check {err:.1e})")


def wgrad(problems, torch_tf):
    print("| groups | tokens | N | K | routing | torch._grouped_mm wgrad TFLOP/s | ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for i, p in enumerate(problems):
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
        torch_tf[("wgrad", i)] = tf
        print(f"| {g} | {tokens} | {n} | {k} | {p['routing']} | {tf:.0f} | {ms:.3f} | (check {err:.1e}; "
              f"{len(empty)} empty groups {'zero' if zeros else 'NOT zero'})")


def rates():
    """The best read, write and copy rates on this GPU (bytes/s): the median of the timed calls
    (timed(), as every other number here) of a sum over 2 GiB of bf16 (reads), a fill of
    2 GiB (writes) and a copy of 1 GiB (its read and write bytes both counted)."""
    big = torch.empty(1 << 30, device="cuda", dtype=torch.bfloat16)  # 2 GiB
    big.uniform_(-1, 1)
    nbytes = big.numel() * big.element_size()
    read = nbytes / (timed(lambda: big.sum(dtype=torch.float32), launches=LAUNCHES) * 1e-3)
    write = nbytes / (timed(lambda: big.fill_(0.5), launches=LAUNCHES) * 1e-3)
    half = big.numel() // 2
    src, dst = big[:half], big[half:]
    copy = 2 * half * big.element_size() / (timed(lambda: dst.copy_(src), launches=LAUNCHES) * 1e-3)
    del big, src, dst
    torch.cuda.empty_cache()
    return read, write, copy


def traffic(p, mode):
    """(bytes read, bytes written) at least: bf16 operands read once, the bf16 output written once."""
    g, n, k, rows = p["groups"], p["n"], p["k"], sum(p["counts"])
    if mode == "forward":  # A [rows][K], B [G][N][K] -> D [rows][N]
        return 2 * (rows * k + g * n * k), 2 * rows * n
    return 2 * (rows * n + rows * k), 2 * g * n * k  # dY, X -> dW [G][N][K]


def ceilings(problems, modes, torch_tf):
    read, write, copy = rates()
    print(f"memory rates on this GPU: read {read / 1e12:.2f} TB/s (sum), write {write / 1e12:.2f} TB/s "
          f"(fill), copy {copy / 1e12:.2f} TB/s (read + written bytes)")
    print("| mode | groups | rows | N | K | routing | MB read | MB written | memory floor us | "
          "ceiling TFLOP/s | at 3.35 TB/s | torch TFLOP/s | 1.3x torch | 1.3x torch within the ceiling |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for mode in modes:
        for i, p in enumerate(problems):
            r, w = traffic(p, mode)
            floor_s = r / read + w / write
            flop = 2 * sum(p["counts"]) * p["n"] * p["k"]
            ceiling = flop / floor_s / 1e12 if floor_s > 0 else float("inf")
            spec = flop / ((r + w) / HBM3_SPEC) / 1e12 if r + w > 0 else float("inf")
            t = torch_tf.get((mode, i))
            goal = f"{1.3 * t:.0f}" if t else "-"
            fits = "-" if not t else ("yes" if 1.3 * t <= ceiling else "NO")
            tt = f"{t:.0f}" if t else "-"
            print(f"| {mode} | {p['groups']} | {sum(p['counts'])} | {p['n']} | {p['k']} | {p['routing']} | "
                  f"{r / 1e6:.0f} | {w / 1e6:.0f} | {floor_s * 1e6:.0f} | {ceiling:.0f} | {spec:.0f} | {tt} | {goal} | {fits} |")


def main():
    path = os.environ.get("GROUPED_COUNTS", sys.argv[1] if len(sys.argv) > 1 else "")
    problems = json.load(open(path))
    mode = os.environ.get("GROUPED_MODE", "")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    if not hasattr(torch, "_grouped_mm"):
        print(f"skipped: torch {torch.__version__} has no torch._grouped_mm (torch 2.8 or later, sm_90)")
        return
    torch_tf = {}
    modes = [m for m in ("forward", "wgrad") if mode in ("", m)]
    if "forward" in modes:
        forward(problems, torch_tf)
    if "wgrad" in modes:
        print()
        wgrad(problems, torch_tf)
    print()
    ceilings(problems, modes, torch_tf)


main()
