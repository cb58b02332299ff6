"""The torch side's timer, shared by the benches' torch scripts (attention_torch.py,
conv_torch.py, grouped_gemm_torch.py): the median of `samples` CUDA-event-timed samples of
`launches` calls back to back, after `warmup` calls and `warm_ms` (BENCH_WARM_MS, default 500)
ms of calls back to back (an H100's clocks settle under its power cap), in ms per call; the
Rust benches time tma the same way (gpu::time_batched, gpu::warm_ms), so both sides count the
same launch gaps at the same clocks."""
import os
import statistics

import torch


def warm_ms_default():
    """BENCH_WARM_MS as the Rust benches read it: a finite number of ms from 0 to an hour, else 500."""
    try:
        v = float(os.environ.get("BENCH_WARM_MS", "500"))
    except ValueError:
        return 500.0
    return v if 0.0 <= v <= 3.6e6 else 500.0


def batch_ms(f, launches):
    """ms of `launches` calls of `f` back to back between one pair of CUDA events."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(launches):
        f()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e)


def timed(f, launches=5, samples=20, warmup=5, warm_ms=None):
    if warm_ms is None:
        warm_ms = warm_ms_default()
    for _ in range(warmup):
        f()
    spent = 0.0
    while spent < warm_ms:
        spent += batch_ms(f, launches)
    return statistics.median(batch_ms(f, launches) / launches for _ in range(samples))
