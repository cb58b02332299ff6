"""cuDNN on the same buffers as examples/07-conv: for every problem the example dumped
(`CONV_DUMP=DIR cargo run --release --example 07-conv`, on the GPU machine), the input x
[N][H][W][C_pad] and filter w [K][R][S][C_pad] are read bit for bit into torch (channels_last),
`torch.nn.functional.conv2d` (cuDNN) runs with the same padding, stride and dilation, and its
output is compared element by element with tma's y [N][P][Q][K]. Both accumulate in fp32 and
round once to the 16-bit type, in different orders, so an element may differ by the rounding of
each (2 ulps of the larger) plus the accumulation's reordering (2^-20 of the sum of the
products' magnitudes, computed here in fp32). Prints one line per problem; exits 1 on any
element outside that."""
import glob
import json
import os
import sys

import torch
import torch.nn.functional as F


def load(path, shape, dtype):
    raw = torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.int16)
    return raw.view(dtype).reshape(shape).cuda()


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CONV_DUMP", "")
    metas = sorted(glob.glob(os.path.join(d, "*.json")))
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}: {len(metas)} problems")
    bad_total = 0
    for m in metas:
        j = json.load(open(m))
        base = m[: -len(".json")]
        dt = torch.bfloat16 if j["dtype"] == "bf16" else torch.float16
        n, h, w, c, k, r, s = j["n"], j["h"], j["w"], j["c_pad"], j["k"], j["r"], j["s"]
        x = load(base + "_x.bin", (n, h, w, c), dt).permute(0, 3, 1, 2)  # NCHW view, channels_last
        f = load(base + "_w.bin", (k, r, s, c), dt).permute(0, 3, 1, 2)
        ours = load(base + "_y.bin", (n, j["p"], j["q"], k), dt).float()
        y = F.conv2d(x, f, stride=j["stride"], padding=j["pad"], dilation=j["dil"])
        y = y.permute(0, 2, 3, 1).float()  # N P Q K
        mag = F.conv2d(x.float().abs(), f.float().abs(), stride=j["stride"], padding=j["pad"], dilation=j["dil"])
        mag = mag.permute(0, 2, 3, 1)
        ulp = 2.0 ** (-7 if dt == torch.bfloat16 else -10)
        big = torch.maximum(y.abs(), ours.abs())
        tol = 2 * ulp * big + 2.0 ** -20 * mag + 1e-30
        diff = (y - ours).abs()
        bad = int((diff > tol).sum().item())
        bad_total += bad
        print(
            f"{os.path.basename(base)}: N{n} {h}x{w} C{j['c']} -> K{k} {r}x{s} pad {j['pad']} stride {j['stride']} "
            f"dil {j['dil']} {j['dtype']}: {y.numel()} outputs, max |tma - cuDNN| {diff.max().item():.3e} "
            f"({(diff / tol).max().item():.2f} of the bound), {bad} outside {'OK' if bad == 0 else 'FAIL'}"
        )
    sys.exit(1 if bad_total or not metas else 0)


main()
