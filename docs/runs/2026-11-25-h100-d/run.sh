#!/usr/bin/env bash
# Session 2026-11-25, last call: the matmul kernels with the built-in tiles
# compiled with their shape fixed (build-time variants), beside cuBLAS of
# the same call; then tests/ops_matmul under the validation layer with
# VKCOMPUTE_REQUIRE_PATHS=1 (the cooperative-matrix path runs there).
# Bundle .gpu_final/ made by hand (this session's last device minutes):
# bin/matmul (release example), bin/test_ops_matmul, Debian 13's layer,
# .gpu/setup.sh and debs. Run: source .gpu_final/setup.sh && bash .gpu_final/run_d.sh
set -u
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bundle.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
timeout 40 python3 - > "$OUT/cublas.json" 2> "$OUT/cublas.err" <<'PY'
import json, torch
d = "cuda"; res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
def bench(fn, iters=10):
    fn(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(iters):
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e) / 1e3)
    ts.sort(); return ts[len(ts) // 2]
torch.backends.cuda.matmul.allow_tf32 = False
for k in (4096, 8192):
    a = torch.randn(k, k, device=d); b = torch.randn(k, k, device=d)
    res[f"sgemm{k}_TFLOPs_fp32"] = 2 * k**3 / bench(lambda: a @ b) / 1e12
    ah, bh = a.half(), b.half()
    res[f"hgemm{k}_TFLOPs_fp16"] = 2 * k**3 / bench(lambda: ah @ bh) / 1e12
print(json.dumps(res))
PY
cat "$OUT/cublas.json"
timeout 120 "$g/bin/matmul" --json "$OUT/matmul.json" > "$OUT/matmul.txt" 2>&1; echo "matmul rc=$?"
grep -vE "^(caps|KHR|NV) " "$OUT/matmul.txt" | cut -c1-140
echo "== test_ops_matmul (validation on, VKCOMPUTE_REQUIRE_PATHS=1)"
VK_LAYER_PATH="$g/layer" VKCOMPUTE_REQUIRE_PATHS=1 timeout 60 "$g/bin/test_ops_matmul" --test-threads=1 > "$OUT/test_ops_matmul.log" 2>&1; echo "rc=$?"
grep -E "^test |test result" "$OUT/test_ops_matmul.log"
