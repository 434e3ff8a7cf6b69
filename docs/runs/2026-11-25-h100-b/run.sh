#!/usr/bin/env bash
# Session 2026-11-25, second perf call: matmul after the constant-bound
# loops in the matmul kernels (cuBLAS figures from cuda_ops_anchor.py's
# matmul part in the same call), then gpu_report's dispatch rows (the
# recording-with-new-bindings rows among them). Run from the project root
# after `source .gpu_perf/setup.sh`.
set -u
g=$(cd "$(dirname "$0")" && pwd)
tar -C "$g" -xJf "$g/bundle.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA
W=$(mktemp -d)
trap 'tar -C "$W" -cJf "$OUT/results.tar.xz" .' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
T0=$(date +%s)
t() { echo "[t+$(( $(date +%s) - T0 ))s] $*"; }
t "cuBLAS (PyTorch, TF32 off), same shapes as cuda_ops_anchor.py"
timeout 60 python3 - > "$W/cublas.json" 2> "$W/cublas.err" <<'PY'
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
echo "rc=$?"; cat "$W/cublas.json"
t "matmul"; timeout 170 "$g/bin/matmul" --json "$W/matmul.json" > "$W/matmul.txt" 2>&1; echo "rc=$?"; grep -vE "^(caps|KHR|NV) " "$W/matmul.txt" | cut -c1-150
t "gpu_report dispatch (push descriptors)"; timeout 300 "$g/bin/gpu_report" --only dispatch --json "$W/report.json" > "$W/report.txt" 2>&1; echo "rc=$?"; cut -c1-170 "$W/report.txt" | tail -40
t done
