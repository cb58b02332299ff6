"""The torch side's timer, shared by the benches' torch scripts (attention_torch.py,
conv_torch.py, grouped_gemm_torch.py): the median of `samples` CUDA-event-timed samples of
`launches` calls back to back, after `warmup` calls, in ms per call; the Rust benches time tma
the same way (gpu::time_batched), so both sides count the same launch gaps."""
import statistics

import torch


def timed(f, launches=5, samples=20, warmup=5):
    for _ in range(warmup):
        f()
    times = []
    for _ in range(samples):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(launches):
            f()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / launches)
    return statistics.median(times)
