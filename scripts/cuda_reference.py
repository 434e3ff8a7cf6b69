#!/usr/bin/env python3
"""The project's CUDA reference: what a CUDA user gets on the same GPU, for
every CUDA column of vkcompute's reports. Run on the GPU machine (PyTorch and
a CUDA driver there); prints one flat JSON object (numbers, and a few
comma-free strings), and writes it to --out when given.

    python3 scripts/cuda_reference.py [--quick] [--out cuda.json]
        [--persist PATH]   # a built scripts/cuda_reference_persist.cu binary,
                           # or the .cu file itself (built with nvcc when present)
        [--matmul]         # only the matmul references (below), as JSON
        [--prefill-linear] # only cuBLAS at the Qwen3-4B prefill's projections
        [--prefill-attention]
                           # only causal attention at the Qwen3-4B prefill's
                           # shape (below)

`--matmul` measures what the f16 benchmark of measure/examples/matmul compares
with, and only that: cuBLAS f16 and bf16 (f32 accumulation, as torch.matmul
runs them) and fp32 with TF32 off at 1024^2 ... 8192^2 (square), torch.bmm
32 x (512 x 128 x 512) in f16 and bf16, each warmed for 500 ms and timed
as min / median / max over 15 repetitions (keys `*_TFLOPs_min/_med/_max`).
Inputs are random normal values; each product is checked once against an
f64 product of its first rows.

Every figure is a median. GPU figures (`*_GBps`, `*_TFLOPs_*`, `*_gpu_us`)
are timed with CUDA events around the work on the current stream; wall
figures (`*_wall_*`, round trips, transfers) with time.perf_counter around
the call and a torch.cuda.synchronize(). Bytes are counted as the Vulkan
side counts them: element-wise ops read every input and write the output
once; a copy reads and writes; a host transfer moves its size once; GB is
10^9 bytes. Each result is checked once against a CPU or an independent
GPU computation before it is timed (a wrong kernel would fail, not time).

Keys read by measure/examples/gpu_report (same names as the shared anchors):
saxpy_GBps, copy_GBps, eager_us_per_kernel, graph_us_per_kernel,
graph_1000_wall_ms, roundtrip_us_one_kernel_sync.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

MIB = 1 << 20


def gpu_time(fn, iters=20, warm=3):
    """Median seconds of fn() between two CUDA events on the current stream."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    return statistics.median(ts)


def wall_time(fn, iters=20, warm=3):
    """Median seconds of fn() + synchronize by the host clock."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def check(name, got, want, tol, scale=None):
    """Fails unless |got - want| <= tol * scale everywhere (scale: the
    largest |want|, at least 1; for a sum, pass the sum of |terms|)."""
    err = (got.float() - want.float()).abs().max().item()
    if scale is None:
        scale = max(want.float().abs().max().item(), 1.0)
    if not err <= tol * scale:
        raise SystemExit(f"cuda_reference: {name} is wrong (max error {err}, scale {scale})")


def clean(s):
    return str(s).replace(",", ";").replace(":", "=").replace('"', "'")[:160]


def elementwise(res, n, quick):
    d = torch.device("cuda")
    g = torch.Generator(device=d).manual_seed(1)
    x = torch.randn(n, device=d, generator=g)
    y = torch.randn(n, device=d, generator=g)
    out = torch.empty_like(x)
    gbps = lambda nbytes, t: nbytes / t / 1e9
    # saxpy in place: y = 2x + y (12 bytes per element).
    y0 = y.clone()
    y.add_(x, alpha=2.0)
    check("saxpy", y, y0 + 2.0 * x, 1e-6)
    res["saxpy_GBps"] = gbps(12 * n, gpu_time(lambda: y.add_(x, alpha=2.0)))
    del y0
    y.copy_(torch.randn(n, device=d, generator=g))
    out.copy_(x)
    check("copy", out, x, 0)
    res["copy_GBps"] = gbps(8 * n, gpu_time(lambda: out.copy_(x)))
    ops = {
        "add": (lambda: torch.add(x, y, out=out), lambda: x + y, 12),
        "sub": (lambda: torch.sub(x, y, out=out), lambda: x - y, 12),
        "mul": (lambda: torch.mul(x, y, out=out), lambda: x * y, 12),
        "scale": (lambda: torch.mul(x, 2.0, out=out), lambda: x * 2.0, 8),
        "fill": (lambda: out.fill_(1.5), lambda: torch.full_like(x, 1.5), 4),
        "relu": (lambda: torch.clamp(x, min=0, out=out), lambda: torch.where(x > 0, x, 0.0), 8),
        "sigmoid": (lambda: torch.sigmoid(x, out=out), lambda: 1 / (1 + torch.exp(-x)), 8),
        "tanh": (lambda: torch.tanh(x, out=out), lambda: torch.tanh(x.double()), 8),
        "gelu_tanh": (
            lambda: out.copy_(F.gelu(x, approximate="tanh")),
            lambda: 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x**3))),
            8,
        ),
        "swish": (lambda: out.copy_(F.silu(x)), lambda: x / (1 + torch.exp(-x)), 8),
    }
    for name, (run, want, bytes_per) in ops.items():
        run()
        check(name, out, want(), 1e-5)
        # gelu and swish through F allocate their result and copy it: time
        # the op alone (what a user writes), not the copy.
        if name == "gelu_tanh":
            run = lambda: F.gelu(x, approximate="tanh")
        elif name == "swish":
            run = lambda: F.silu(x)
        res[f"{name}_GBps"] = gbps(bytes_per * n, gpu_time(run))
    # Reductions (4 bytes per element read; dot 8).
    check("sum", x.sum().reshape(1), x.double().sum().reshape(1), 1e-6, x.abs().sum().item())
    res["sum_GBps"] = gbps(4 * n, gpu_time(lambda: x.sum()))
    check("max", x.max().reshape(1), x.cpu().max().reshape(1).to(d), 0)
    res["max_GBps"] = gbps(4 * n, gpu_time(lambda: x.max()))
    xy = (x.double() * y.double())
    check("dot", torch.dot(x, y).reshape(1), xy.sum().reshape(1), 1e-6, xy.abs().sum().item())
    del xy
    res["dot_GBps"] = gbps(8 * n, gpu_time(lambda: torch.dot(x, y)))
    res["elementwise_elements"] = n

    # A chain of four element-wise ops: eager (four kernels) and
    # torch.compile (fused, where Triton works).
    def chain(a, b):
        return F.gelu(a * 2.0 + b, approximate="tanh") * b

    want = chain(x.double(), y.double())
    check("chain4 eager", chain(x, y), want, 1e-5)
    res["chain4_eager_ms"] = gpu_time(lambda: chain(x, y)) * 1e3
    try:
        cc = torch.compile(chain)
        check("chain4 compiled", cc(x, y), want, 1e-5)
        res["chain4_compiled_ms"] = gpu_time(lambda: cc(x, y)) * 1e3
    except Exception as ex:  # torch.compile needs a working Triton
        res["chain4_compiled_error"] = clean(ex)
    res["chain4_min_bytes"] = 12 * n


def rows_ops(res, quick):
    d = torch.device("cuda")
    r = 4096 if quick else 8192
    g = torch.Generator(device=d).manual_seed(2)
    m = torch.randn(r, r, device=d, generator=g)
    gbps = lambda nbytes, t: nbytes / t / 1e9
    sm = torch.softmax(m, dim=1)
    e = torch.exp(m.double() - m.double().max(dim=1, keepdim=True).values)
    check("softmax", sm, e / e.sum(dim=1, keepdim=True), 1e-5)
    res[f"softmax_rows{r}_GBps"] = gbps(8 * r * r, gpu_time(lambda: torch.softmax(m, dim=1)))
    t = m.t().contiguous()
    check("transpose", t[:64, :64], m[:64, :64].t(), 0)
    res[f"transpose{r}_GBps"] = gbps(8 * r * r, gpu_time(lambda: m.t().contiguous()))
    v = torch.randn(r, device=d, generator=g)
    check("gemv", torch.mv(m, v), torch.mv(m.double(), v.double()), 1e-5)
    res[f"gemv{r}_GBps"] = gbps(4 * r * r, gpu_time(lambda: torch.mv(m, v)))
    del m, v, sm, e, t

    for k in (2048,) if quick else (4096, 8192):
        a = torch.randn(k, k, device=d, generator=g)
        b = torch.randn(k, k, device=d, generator=g)
        torch.backends.cuda.matmul.allow_tf32 = False
        ref = a[:128].double() @ b.double()
        check(f"sgemm{k}", (a @ b)[:128], ref, 1e-4)
        res[f"sgemm{k}_TFLOPs_fp32"] = 2 * k**3 / gpu_time(lambda: a @ b, iters=10) / 1e12
        torch.backends.cuda.matmul.allow_tf32 = True
        res[f"sgemm{k}_TFLOPs_tf32"] = 2 * k**3 / gpu_time(lambda: a @ b, iters=10) / 1e12
        torch.backends.cuda.matmul.allow_tf32 = False
        ah, bh = a.half(), b.half()
        check(f"hgemm{k}", (ah @ bh)[:128], ah[:128].double() @ bh.double(), 1e-2)
        res[f"hgemm{k}_TFLOPs_fp16"] = 2 * k**3 / gpu_time(lambda: ah @ bh, iters=10) / 1e12
        del a, b, ah, bh, ref
    shapes = ((127, 255, 63),) if quick else ((127, 255, 63), (1, 4096, 4096), (4097, 4097, 4097))
    for mm, kk, nn in shapes:
        a = torch.randn(mm, kk, device=d, generator=g)
        b = torch.randn(kk, nn, device=d, generator=g)
        check(f"sgemm {mm}x{kk}x{nn}", (a @ b)[:64], a[:64].double() @ b.double(), 1e-4)
        res[f"sgemm_{mm}x{kk}x{nn}_gpu_us"] = gpu_time(lambda: a @ b, iters=10) * 1e6


def stats_time(fn, reps=15, warm_s=0.5):
    """(min, median, max) seconds of fn() between CUDA events, after
    running it back to back for warm_s seconds."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warm_s:
        for _ in range(4):
            fn()
        torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    return min(ts), statistics.median(ts), max(ts)


def put_stats(res, key, flops, fn, quick):
    lo, med, hi = stats_time(fn, reps=15, warm_s=0.05 if quick else 0.5)
    res[f"{key}_TFLOPs_max"] = flops / lo / 1e12
    res[f"{key}_TFLOPs_med"] = flops / med / 1e12
    res[f"{key}_TFLOPs_min"] = flops / hi / 1e12


def matmul_refs(res, quick):
    """cuBLAS f16 / bf16 / fp32 (TF32 off) at square sizes and a bmm."""
    d = torch.device("cuda")
    g = torch.Generator(device=d).manual_seed(7)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for k in (1024, 2048) if quick else (1024, 2048, 4096, 8192):
        a = torch.randn(k, k, device=d, generator=g)
        b = torch.randn(k, k, device=d, generator=g)
        flops = 2 * k**3
        for name, dt, tol in (("hgemm", torch.float16, 1e-2), ("bf16gemm", torch.bfloat16, 2e-2)):
            ah, bh = a.to(dt), b.to(dt)
            ref = ah[:64].double() @ bh.double()
            check(f"{name}{k}", (ah @ bh)[:64], ref, tol)
            put_stats(res, f"{name}{k}", flops, lambda: ah @ bh, quick)
            del ah, bh, ref
        check(f"sgemm{k}", (a @ b)[:64], a[:64].double() @ b.double(), 1e-4)
        put_stats(res, f"sgemm{k}_fp32_notf32", flops, lambda: a @ b, quick)
        del a, b
    # fp32 at a size that is not a multiple of any tile (rows not 16-byte
    # units), beside the matmul example's 4097³ row.
    if not quick:
        k = 4097
        a = torch.randn(k, k, device=d, generator=g)
        b = torch.randn(k, k, device=d, generator=g)
        check(f"sgemm{k}", (a @ b)[:64], a[:64].double() @ b.double(), 1e-4)
        put_stats(res, f"sgemm{k}_fp32_notf32", 2 * k**3, lambda: a @ b, quick)
        del a, b
    bt, m, k, n = 32, 512, 128, 512
    for name, dt, tol in (("bmm_f16", torch.float16, 1e-2), ("bmm_bf16", torch.bfloat16, 2e-2)):
        a = torch.randn(bt, m, k, device=d, generator=g).to(dt)
        b = torch.randn(bt, k, n, device=d, generator=g).to(dt)
        check(name, torch.bmm(a, b)[0], a[0].double() @ b[0].double(), tol)
        put_stats(res, f"{name}_32x512x128x512", 2 * bt * m * k * n, lambda: torch.bmm(a, b), quick)
        del a, b


def prefill_linear_refs(res, quick):
    """cuBLAS through F.linear (x [512, K] by a weight stored [N, K]) at the
    Qwen3-4B prefill's four projections, f16 and bf16: the figures beside
    the matmul example's `--prefill-shapes` rows (`prefill512_<name>_*`)."""
    d = torch.device("cuda")
    g = torch.Generator(device=d).manual_seed(11)
    m = 64 if quick else 512
    for name, k, n in (("qkv", 2560, 6144), ("o", 4096, 2560), ("gate_up", 2560, 19456),
                       ("down", 9728, 2560)):
        if quick:
            k, n = k // 4, n // 4
        x = torch.randn(m, k, device=d, generator=g)
        w = torch.randn(n, k, device=d, generator=g)
        for tag, dt, tol in (("f16", torch.float16, 1e-2), ("bf16", torch.bfloat16, 2e-2)):
            xh, wh = x.to(dt), w.to(dt)
            check(f"linear {name} {tag}", F.linear(xh, wh)[:16],
                  xh[:16].double() @ wh.double().T, tol)
            put_stats(res, f"prefill{m}_{name}_cublas_{tag}", 2 * m * k * n,
                      lambda: F.linear(xh, wh), quick)
            del xh, wh
        del x, w


def prefill_attention_refs(res, quick):
    """Causal attention of one sequence of 512 tokens at Qwen3-4B's heads
    (32 query heads over 8 kv heads of 128), f16 and bf16, through
    F.scaled_dot_product_attention(is_causal=True, enable_gqa=True) (its
    flash kernel): the figures beside attn_probe's `--prefill` rows
    (`prefill512_attention_sdpa_<dtype>_us_min/_med/_max`, GPU µs per call).
    FLOPs counted as the Vulkan side counts them: 4 · heads · dim · the
    query-key pairs the causal mask keeps."""
    d = torch.device("cuda")
    g = torch.Generator(device=d).manual_seed(13)
    t = 128 if quick else 512
    hq, hkv, dim = 32, 8, 128
    q = torch.randn(1, hq, t, dim, device=d, generator=g)
    k = torch.randn(1, hkv, t, dim, device=d, generator=g)
    v = torch.randn(1, hkv, t, dim, device=d, generator=g)
    pairs = t * (t + 1) // 2
    flops = 4 * hq * dim * pairs
    res[f"prefill{t}_attention_flops"] = flops
    for tag, dt, tol in (("f16", torch.float16, 1e-2), ("bf16", torch.bfloat16, 3e-2)):
        qh, kh, vh = q.to(dt), k.to(dt), v.to(dt)
        run = lambda: F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, enable_gqa=True)
        kr = kh.double().repeat_interleave(hq // hkv, dim=1)
        vr = vh.double().repeat_interleave(hq // hkv, dim=1)
        sc = (qh.double() @ kr.transpose(-1, -2)) / dim ** 0.5
        mask = torch.ones(t, t, device=d, dtype=torch.bool).tril()
        want = torch.softmax(sc.masked_fill(~mask, float("-inf")), dim=-1) @ vr
        check(f"sdpa {tag}", run(), want, tol)
        lo, med, hi = stats_time(run, reps=15, warm_s=0.05 if quick else 0.5)
        for key, x in (("min", lo), ("med", med), ("max", hi)):
            res[f"prefill{t}_attention_sdpa_{tag}_us_{key}"] = x * 1e6
        res[f"prefill{t}_attention_sdpa_{tag}_TFLOPs_med"] = flops / med / 1e12
        del qh, kh, vh, kr, vr, sc, want


def transfers(res, quick):
    d = torch.device("cuda")
    nb = (64 if quick else 256) * MIB
    n = nb // 4
    host = torch.arange(n, dtype=torch.float32)
    pinned = torch.empty(n, dtype=torch.float32).pin_memory()
    pinned.copy_(host)
    dev = torch.empty(n, dtype=torch.float32, device=d)
    for name, h in (("pageable", host), ("pinned", pinned)):
        dev.copy_(h)
        check(f"h2d {name}", dev[-1024:], h[-1024:].to(d), 0)
        res[f"h2d_{name}_GBps"] = nb / wall_time(lambda: dev.copy_(h), iters=10) / 1e9
        back = torch.empty_like(h)
        if name == "pinned":
            back = back.pin_memory()
        back.copy_(dev)
        if not torch.equal(back, h):
            raise SystemExit(f"cuda_reference: d2h {name} is wrong")
        res[f"d2h_{name}_GBps"] = nb / wall_time(lambda: back.copy_(dev), iters=10) / 1e9
    res["transfer_bytes"] = nb


def launches(res, quick):
    d = torch.device("cuda")
    z = torch.zeros(1024, device=d)
    steps = 1000

    def chain():
        for _ in range(steps):
            z.add_(1.0)

    z.zero_()
    chain()
    check("chain of 1000", z, torch.full_like(z, steps), 0)
    res["eager_us_per_kernel"] = gpu_time(chain, iters=10) / steps * 1e6
    res["eager_1000_wall_ms"] = wall_time(chain, iters=10) * 1e3
    # Launch + synchronize of one tiny kernel, back-to-back, and isolated
    # (5 ms of sleep before each, nothing primed by the previous wait).
    reps = 200 if quick else 2000
    for _ in range(100):
        z.add_(1.0)
        torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        z.add_(1.0)
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    res["roundtrip_us_one_kernel_sync"] = statistics.median(ts) * 1e6
    ts = []
    for _ in range(20 if quick else 200):
        time.sleep(0.005)
        t0 = time.perf_counter()
        z.add_(1.0)
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    res["roundtrip_isolated_us_one_kernel_sync"] = statistics.median(ts) * 1e6
    # CUDA graph of the 1000-kernel chain, replayed; and a one-node graph.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        chain()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        chain()
    z.zero_()
    g.replay()
    check("graph replay", z, torch.full_like(z, steps), 0)
    res["graph_us_per_kernel"] = gpu_time(g.replay, iters=10) / steps * 1e6
    res["graph_1000_wall_ms"] = wall_time(g.replay, iters=50) * 1e3
    g1 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g1):
        z.add_(1.0)
    ts = []
    for i in range(reps + 100):
        t0 = time.perf_counter()
        g1.replay()
        torch.cuda.synchronize()
        if i >= 100:
            ts.append(time.perf_counter() - t0)
    res["graph1_roundtrip_us"] = statistics.median(ts) * 1e6


def persistent(res, path, quick):
    """Runs the CUDA C++ persistent-kernel reference (building it from the
    .cu with nvcc when given the source) and merges its JSON."""
    if path is None:
        return
    exe = path
    if path.endswith(".cu"):
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        if not os.path.exists(nvcc):
            res["persist_error"] = "nvcc not found"
            return
        major, minor = torch.cuda.get_device_capability()
        exe = os.path.join(tempfile.mkdtemp(), "cuda_reference_persist")
        cmd = [nvcc, "-O3", f"-arch=sm_{major}{minor}", "-o", exe, path]
        b = subprocess.run(cmd, capture_output=True, text=True)
        if b.returncode != 0:
            res["persist_error"] = clean("nvcc: " + b.stderr[-300:])
            return
    r = subprocess.run([exe] + (["--quick"] if quick else []), capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        res["persist_error"] = clean(r.stdout[-200:] + r.stderr[-200:])
        return
    for k, v in json.loads(r.stdout).items():
        res[f"persist_{k}"] = v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--persist")
    ap.add_argument("--matmul", action="store_true", help="only the matmul references")
    ap.add_argument("--prefill-linear", action="store_true",
                    help="only the Qwen3-4B prefill projections (with --matmul: both)")
    ap.add_argument("--prefill-attention", action="store_true",
                    help="only the Qwen3-4B prefill's causal attention (with the others: all)")
    a = ap.parse_args()
    torch.manual_seed(0)
    res = {
        "gpu": clean(torch.cuda.get_device_name()),
        "torch": clean(torch.__version__),
        "cuda": clean(torch.version.cuda),
    }
    t0 = time.time()
    if a.matmul or a.prefill_linear or a.prefill_attention:
        if a.matmul:
            matmul_refs(res, a.quick)
        if a.prefill_linear:
            prefill_linear_refs(res, a.quick)
        if a.prefill_attention:
            prefill_attention_refs(res, a.quick)
        res["seconds"] = round(time.time() - t0, 1)
        text = json.dumps(res, indent=1)
        print(text)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text + "\n")
        return 0
    elementwise(res, (16 if a.quick else 64) * MIB, a.quick)
    torch.cuda.empty_cache()
    rows_ops(res, a.quick)
    torch.cuda.empty_cache()
    transfers(res, a.quick)
    launches(res, a.quick)
    persistent(res, a.persist, a.quick)
    res["seconds"] = round(time.time() - t0, 1)
    text = json.dumps(res, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
