#!/usr/bin/env python3
"""PyTorch's time for the FFN stack of measure/examples/ffn_stack.rs on the same GPU:
per layer y = silu(y·Wgᵀ) * (y·Wuᵀ) · Wdᵀ + y, weights as nn.Linear stores
them ([out, in]), the gate and up weights merged into one [2·I, H] matrix
(one GEMM, as fast inference stacks merge them), the down projection and
the residual add in one torch.addmm. Qwen3-4B's shape by default (hidden
2560, intermediate 9728, 36 layers), T = 1, 4, 64 tokens, f32 weights and
activations with TF32 off, and bf16 weights (activations bf16 too: PyTorch
multiplies matrices of one dtype; cuBLAS accumulates in f32).

The forward is captured once as a CUDA graph and replayed: each timed
replay is wall time from replay() to the end of torch.cuda.synchronize(),
the median of --reps (20) after --warm (5) untimed replays, as the Vulkan
side times a graph launch and its wait. Also measured: copy bandwidth
(y.copy_(x) of 1 GiB, CUDA events, read + write bytes). Before timing,
the graph's output is compared once with the same stack computed in f64 on
the GPU; the largest error relative to the largest output is reported
(`*_max_rel_err`) and must stay under 1e-3 (f32) or 1e-1 (bf16: the
activations round to 8 bits at every layer; the bound only catches a wrong
result).

    python3 scripts/ffn_reference.py [--hidden 2560] [--inter 9728]
        [--layers 36] [--tokens 1,4,64] [--dtypes f32,bf16] [--reps 20]
        [--warm 5] [--quick] [--out ffn_torch.json]

--quick: hidden 256, intermediate 768, 4 layers. Prints one flat JSON
object (keys f32_T1_ms, f32_T1_min_ms, f32_T1_max_ms, f32_T1_weight_GBps,
..., copy_GBps) that measure/examples/ffn_stack.rs reads with --torch.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", type=int, default=2560)
    p.add_argument("--inter", type=int, default=9728)
    p.add_argument("--layers", type=int, default=36)
    p.add_argument("--tokens", default="1,4,64")
    p.add_argument("--dtypes", default="f32,bf16")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warm", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out")
    a = p.parse_args()
    if a.quick:
        a.hidden, a.inter, a.layers = 256, 768, 4
    a.tokens = [int(t) for t in a.tokens.split(",")]
    a.dtypes = a.dtypes.split(",")
    for d in a.dtypes:
        if d not in ("f32", "bf16"):
            p.error(f"--dtypes: f32 or bf16, got {d}")
    return a


def copy_gbps(dev):
    n = (1 << 30) // 4
    x = torch.randn(n, device=dev)
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    torch.cuda.synchronize()
    ts = []
    for _ in range(9):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        y.copy_(x)
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    assert torch.equal(x, y)
    return 2 * 4 * n / statistics.median(ts) / 1e9


def make_layers(n, h, i, dtype, dev, gen):
    """n layers of (merged gate|up [2I, H], down [H, I]), scaled by 1/sqrt(fan-in)."""
    layers = []
    for _ in range(n):
        gu = (torch.rand(2 * i, h, device=dev, generator=gen) * 2 - 1) / h**0.5
        d = (torch.rand(h, i, device=dev, generator=gen) * 2 - 1) / i**0.5
        layers.append((gu.to(dtype), d.to(dtype)))
    return layers


def forward(x, layers, inter):
    y = x
    for gu, d in layers:
        g, u = F.linear(y, gu).split(inter, dim=-1)
        y = torch.addmm(y, F.silu(g) * u, d.t())
    return y


def main():
    a = parse()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda")
    res = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "hidden": a.hidden,
        "inter": a.inter,
        "layers": a.layers,
    }
    res["copy_GBps"] = round(copy_gbps(dev), 2)
    for name in a.dtypes:
        dtype = torch.float32 if name == "f32" else torch.bfloat16
        gen = torch.Generator(device=dev)
        gen.manual_seed(1)
        layers = make_layers(a.layers, a.hidden, a.inter, dtype, dev, gen)
        wbytes = sum(t.numel() * t.element_size() for pair in layers for t in pair)
        for t in a.tokens:
            key = f"{name}_T{t}"
            x = (torch.rand(t, a.hidden, device=dev, generator=gen) * 2 - 1).to(dtype)
            out = torch.empty_like(x)
            # Warm-up on a side stream before capture, as CUDA graphs require.
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    out.copy_(forward(x, layers, a.inter))
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out.copy_(forward(x, layers, a.inter))
            graph.replay()
            torch.cuda.synchronize()
            # The f64 reference, one layer's weights widened at a time.
            y = x.double()
            for gu, d in layers:
                g, u = F.linear(y, gu.double()).split(a.inter, dim=-1)
                y = torch.addmm(y, F.silu(g) * u, d.double().t())
            err = ((out.double() - y).abs().max() / y.abs().max()).item()
            res[f"{key}_max_rel_err"] = err
            limit = 1e-3 if name == "f32" else 1e-1
            assert err < limit, f"{key}: graph output differs from f64 by {err:.2e}"
            del y
            for _ in range(a.warm):
                graph.replay()
            torch.cuda.synchronize()
            ts = []
            for _ in range(a.reps):
                s = time.perf_counter()
                graph.replay()
                torch.cuda.synchronize()
                ts.append(time.perf_counter() - s)
            med = statistics.median(ts)
            res[f"{key}_ms"] = round(med * 1e3, 4)
            res[f"{key}_min_ms"] = round(min(ts) * 1e3, 4)
            res[f"{key}_max_ms"] = round(max(ts) * 1e3, 4)
            res[f"{key}_weight_GBps"] = round(wbytes / med / 1e9, 2)
            del graph, out, x
        del layers
        torch.cuda.empty_cache()
    text = json.dumps(res)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
