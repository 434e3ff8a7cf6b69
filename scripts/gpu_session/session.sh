#!/usr/bin/env bash
# One device call's measurements, by part (the runs under docs/runs/2026-11-25c-h200-c* used it). Copy this folder
# into .gpu/ beside the kit of ../shared/gpu/prepare.sh, with bundle.tar.xz
# (bin/: the release binaries a part runs; layer/: the validation layer, as
# scripts/gpu_bundle.sh packs it) and the scripts it names
# (compare_dispatch.py, ffn_reference.py, cuda_reference.py as
# cuda_reference_mm.py), then run it there with the parts wanted.
# Usage there: bash .gpu/session.sh PART... (dispatch roundtrip ffn ffn_ab ffn_splits sweep tests matmul spread lprobe qwen3 qwen3_ab decode_ab spin attn_ab q3var longctx prefill_len chunkdiag churn abprobe stats)
set -uo pipefail
g=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
W=$(mktemp -d)
source "$g/setup.sh" >/dev/null
tar -C "$g" -xJf "$g/bundle.tar.xz"
export VKCOMPUTE_DEVICE=NVIDIA
parts=" $* "
has() { [[ "$parts" == *" $1 "* ]]; }
finish() { tar -C "$W" -cJf "$OUT/results.tar.xz" .; }
trap finish EXIT
{
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
git_rev=$(cat "$g/REV" 2>/dev/null); echo "commit: $git_rev"
# gpu_report of the base build (bin/gpu_report_base, else bin/gpu_report)
# and of this one (bin/gpu_report_new, else bin/gpu_report), N processes
# each, alternating, every process pinned to the cores in DISPATCH_CPUS
# (default 2,3; empty: unpinned), children included: unpinned processes
# read bimodal round trips (one process 18 µs isolated, the next 70 µs)
# whichever build ran. GPU_REPORT_BUILDS (default "base new") names the
# builds, each bin/gpu_report_NAME (bin/gpu_report where that is missing),
# e.g. "base mid new" with a third build between the two. Round i starts
# at build i - 1 of the list (mod its length), so that no build always
# runs first or last (with "base new again", the base binary packed
# twice, the two halves of one binary read up to 0.024 apart in the
# spinning round trips' ratios and 0.064 in the blocking one's CPU time
# when base always ran first and again last: calls n1 and n2,
# 2026-11-27). Usage: gpu_report_builds N PREFIX ARG...; writes
# $W/PREFIX_NAME_I.json and .txt.
gpu_report_builds() {
  local n=$1 prefix=$2 cpus=${DISPATCH_CPUS-2,3} pin=()
  shift 2
  [ -z "$cpus" ] || pin=(taskset -c "$cpus")
  echo "gpu_report processes pinned to: ${cpus:-none}"; lscpu | grep -E "^(Model name|CPU\(s\)|NUMA node|Thread)" || true
  local all=(${GPU_REPORT_BUILDS:-base new}) order k
  for i in $(seq 1 "$n"); do
    order=()
    for k in "${!all[@]}"; do order+=("${all[$(( (k + i - 1) % ${#all[@]} ))]}"); done
    for b in "${order[@]}"; do
      echo "== gpu_report $* ($b, process $i)"
      bin="$g/bin/gpu_report_$b"; [ -f "$bin" ] || bin="$g/bin/gpu_report"
      "${pin[@]}" "$bin" "$@" --json "$W/${prefix}_${b}_$i.json" > "$W/${prefix}_${b}_$i.txt" 2>&1
      echo "rc=$?"; grep -E "record|chain|round|independent|auto" "$W/${prefix}_${b}_$i.txt" | head -30
    done
  done
}
part_dispatch() {
  echo "== cuda_anchor.py"
  python3 "$g/cuda_anchor.py" > "$W/cuda_anchor.json" 2> "$W/cuda_anchor.err"; tail -c 600 "$W/cuda_anchor.json"; echo
  gpu_report_builds 3 dispatch --only dispatch --cuda "$W/cuda_anchor.json"
  # Rows named by DISPATCH_NO_BASE (default "auto barriers": a fac9bce base
  # from dispatch_base.sh records them manually) compare with nothing.
  local nobase=${DISPATCH_NO_BASE-auto barriers} nb=()
  [ -z "$nobase" ] || nb=(--no-base "$nobase")
  python3 "$g/compare_dispatch.py" --base "$W"/dispatch_base_*.json --new "$W"/dispatch_new_*.json --limit 0.03 "${nb[@]}" | tee "$W/compare.md"
  cp "$W"/dispatch_*.json "$W/compare.md" "$OUT/" 2>/dev/null
}
part_roundtrip() {
  # The round-trip rows alone (gpu_report --only roundtrip: three children
  # per side, seconds a process), ROUNDTRIP_PROCS processes per build
  # (default 7): enough for a median that the per-process levels of these
  # rows do not decide.
  # Every build after the first is compared with the first.
  # With a build named "again" (the first build's binary packed a second
  # time: an A/A), every other build is also compared with the first and
  # again pooled, the base's best estimate.
  gpu_report_builds "${ROUNDTRIP_PROCS:-7}" rt --only roundtrip
  local builds=(${GPU_REPORT_BUILDS:-base new}) b
  for b in "${builds[@]:1}"; do
    echo "== round trips: $b against ${builds[0]}"
    python3 "$g/compare_dispatch.py" --base "$W"/rt_"${builds[0]}"_*.json --new "$W"/rt_"$b"_*.json --limit 0.03 | tee "$W/compare_rt_$b.md"
    if [[ " ${builds[*]} " == *" again "* && $b != again ]]; then
      echo "== round trips: $b against ${builds[0]} and again pooled"
      python3 "$g/compare_dispatch.py" --base "$W"/rt_"${builds[0]}"_*.json "$W"/rt_again_*.json --new "$W"/rt_"$b"_*.json --limit 0.03 | tee "$W/compare_rt_${b}_pooled.md"
    fi
  done
  # One archive: the device tool returns a limited number of files.
  (cd "$W" && tar -cJf "$OUT/rt.tar.xz" rt_*.json rt_*.txt compare_rt_*.md)
}
part_ffn() {
  # FFN_TOKENS: the row counts of both sides (default 1,4,64).
  echo "== ffn_reference.py (PyTorch, CUDA graph)"
  python3 "$g/ffn_reference.py" --tokens "${FFN_TOKENS:-1,4,64}" --out "$W/ffn_torch.json" > "$W/ffn_torch.txt" 2>&1; echo "rc=$?"; tail -25 "$W/ffn_torch.txt"
  echo "== ffn_stack"
  "$g/bin/ffn_stack" --tokens "${FFN_TOKENS:-1,4,64}" --torch "$W/ffn_torch.json" --json "$W/ffn_ours.json" > "$W/ffn_stack.txt" 2>&1; echo "rc=$?"; cat "$W/ffn_stack.txt" | tail -40
}
part_ffn_ab() {
  # ffn_stack at the base commit packed as bin/ffn_stack_base beside this
  # build, alternating, after PyTorch: T = 1 and 4 (the skinny kernels)
  # and both weight types unless FFN_AB_TOKENS / FFN_AB_DTYPES say others.
  echo "== ffn_reference.py (PyTorch, CUDA graph)"
  python3 "$g/ffn_reference.py" --out "$W/ffn_torch.json" > "$W/ffn_torch.txt" 2>&1; echo "rc=$?"; tail -8 "$W/ffn_torch.txt"
  for i in 1 2; do
    for b in base new; do
      bin="$g/bin/ffn_stack_$b"; [ -f "$bin" ] || bin="$g/bin/ffn_stack"
      echo "== ffn_stack $b (process $i), T = ${FFN_AB_TOKENS:-1,4}, ${FFN_AB_DTYPES:-f32,bf16}"
      "$bin" --tokens "${FFN_AB_TOKENS:-1,4}" --dtypes "${FFN_AB_DTYPES:-f32,bf16}" --torch "$W/ffn_torch.json" > "$W/ffn_ab_${b}_$i.txt" 2>&1; echo "rc=$?"
      grep -E "median|match|copy" "$W/ffn_ab_${b}_$i.txt" | cut -c1-200
    done
  done
}
part_ffn_splits() {
  # ffn_stack with every layer's K slices forced (`--splits S` for each S
  # of FFN_SPLITS), T = FFN_SPLITS_TOKENS (64), f32 weights: how the
  # tiled kernel's time moves with the plan's split count.
  for s in ${FFN_SPLITS:-1 2 4 8}; do
    echo "== ffn_stack --splits $s, T = ${FFN_SPLITS_TOKENS:-64}, f32"
    "$g/bin/ffn_stack" --tokens "${FFN_SPLITS_TOKENS:-64}" --dtypes f32 --splits "$s" > "$W/ffn_splits_$s.txt" 2>&1; echo "rc=$?"
    grep -E "median|match" "$W/ffn_splits_$s.txt" | cut -c1-200
  done
}
part_tests() {
  export VK_LAYER_PATH="$g/layer" VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1
  for t in "$g"/bin/test_*; do
    n=$(basename "$t")
    echo "== $n (validation on, NVIDIA)"
    timeout 240 "$t" --test-threads=1 > "$W/$n.txt" 2>&1; echo "rc=$?"
    grep -E "test result|FAILED|panicked|skipped" "$W/$n.txt" | head -12
  done
  unset VKCOMPUTE_VALIDATION VKCOMPUTE_VALIDATION_ERRORS VK_LAYER_PATH
}
part_churn() {
  export VK_LAYER_PATH="$g/layer"
  # Each device_churn test in a process of its own: where the driver stops
  # giving instances, and what keeps it going.
  for t in forty_adapter_listings forty_devices_made_and_dropped_without_work \
           forty_devices_with_validation_leave_no_files_or_threads \
           forty_devices_without_validation_leave_no_files_or_threads; do
    echo "== device_churn $t (own process, VK_LOADER_DEBUG=error)"
    VK_LOADER_DEBUG=error timeout 120 "$g/bin/test_device_churn" --exact "$t" --nocapture > "$W/churn_$t.txt" 2>&1; echo "rc=$?"
    grep -E "rounds|failed|devices;|LOADER|rror" "$W/churn_$t.txt" | sort | uniq -c | sort -rn | head -6 | cut -c1-400
  done
}
part_sweep() {
  bash "$g/ffn_sweep.sh" "$g" "$W" 2>&1 | tee "$W/ffn_sweep.txt"
}
part_abprobe() {
  export VK_LAYER_PATH="$g/layer" VKCOMPUTE_VALIDATION=1 VKCOMPUTE_VALIDATION_ERRORS=1
  echo "== batch_auto_barriers: the two tests that failed, alone"
  "$g/bin/ab" --test-threads=1 switching_off_mid_batch_stops_tracking the_log_follows_set_record_plan 2>&1 | grep -E "^test |test result"
  echo "== batch_auto_barriers: whole binary, VK_LOADER_DEBUG=error"
  VK_LOADER_DEBUG=error "$g/bin/ab" --test-threads=1 2>&1 | grep -E "FAILED|test result|LOADER|rror" | head -20
  unset VK_LAYER_PATH VKCOMPUTE_VALIDATION VKCOMPUTE_VALIDATION_ERRORS
}
part_qwen3() {
  # The checkpoints go outside $W (the results folder): the 4B one is 8 GB.
  local q=/tmp/q3; rm -rf "$q" "$q-tiny"
  echo "== qwen3_reference.py --size tiny (transformers, f32 logits)"
  python3 "$g/qwen3_reference.py" --out "$q-tiny" --size tiny --decode 16 --no-timing > "$W/q3tiny_ref.txt" 2>&1; echo "rc=$?"; tail -5 "$W/q3tiny_ref.txt"
  echo "== qwen3 tiny --reference"
  timeout 120 "$g/bin/qwen3" "$q-tiny" --reference "$q-tiny/reference.safetensors" > "$W/q3tiny_ours.txt" 2>&1; echo "rc=$?"; tail -30 "$W/q3tiny_ours.txt"
  echo "== qwen3_reference.py --size 4b ${QWEN3_REF_ARGS:-}"
  python3 "$g/qwen3_reference.py" --out "$q" --size 4b ${QWEN3_REF_ARGS:-} > "$W/q3_ref.txt" 2>&1; echo "rc=$?"; tail -40 "$W/q3_ref.txt"
  cp "$q/reference_timing.json" "$q/config.json" "$W/" 2>/dev/null
  echo "== qwen3 4b --reference (f32 activations and cache, the default: the correctness check)"
  timeout 240 "$g/bin/qwen3" "$q" --reference "$q/reference.safetensors" > "$W/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "reference|worst|FAIL|PASS" "$W/q3_check.txt" | tail -8
  for i in 1 2; do
    echo "== qwen3 4b --decode 64 (default options, timing, process $i)"
    timeout 240 "$g/bin/qwen3" "$q" --decode 64 > "$W/q3_ours_$i.txt" 2>&1; echo "rc=$?"; grep -E "load|decode|host|memory" "$W/q3_ours_$i.txt"
  done
  echo "== qwen3 4b --decode 32 --profile (per-kernel profile; not a timing figure)"
  timeout 240 "$g/bin/qwen3" "$q" --decode 32 --profile > "$W/q3_ours.txt" 2>&1; echo "rc=$?"; tail -40 "$W/q3_ours.txt"
  for path in auto exact; do
    echo "== qwen3 4b: prefill 512 tokens, --prefill $path"
    timeout 120 "$g/bin/qwen3" "$q" --prompt-len 512 --decode 8 --prefill "$path" --profile > "$W/q3_p512_$path.txt" 2>&1; echo "rc=$?"; grep -E "prefill|decode \(|commands" "$W/q3_p512_$path.txt"; grep -A16 "profile of the prefill" "$W/q3_p512_$path.txt"
  done
  for p in 600 4000; do
    echo "== qwen3 4b: decode after a prompt of $p tokens"
    timeout 150 "$g/bin/qwen3" "$q" --prompt-len "$p" --decode 32 > "$W/q3_pos$p.txt" 2>&1; echo "rc=$?"; grep -E "prefill|decode|commands" "$W/q3_pos$p.txt"
  done
  for b in 4 16; do
    echo "== qwen3 4b --batch $b"
    timeout 120 "$g/bin/qwen3" "$q" --batch "$b" --decode 32 > "$W/q3_b$b.txt" 2>&1; echo "rc=$?"; tail -25 "$W/q3_b$b.txt"
  done
}
q3_checked() {
  # The A/B parts' start: a Qwen3-4B checkpoint and its f32 logits from
  # transformers in $1, and this build checked against them.
  rm -rf "$1"
  echo "== qwen3_reference.py --size 4b --no-timing (checkpoint and f32 logits)"
  python3 "$g/qwen3_reference.py" --out "$1" --size 4b --no-timing > "$W/q3_ref.txt" 2>&1; echo "rc=$?"; tail -5 "$W/q3_ref.txt"
  echo "== qwen3 4b --reference (this build)"
  timeout 240 "$g/bin/qwen3" "$1" --reference "$1/reference.safetensors" > "$W/q3_check.txt" 2>&1; echo "rc=$?"; grep -E "reference|worst|FAIL|PASS" "$W/q3_check.txt" | tail -8
}
q3_ready() {
  # The checkpoint of an earlier part of this call in $1, or a new one.
  [ -f "$1/config.json" ] || q3_checked "$1"
}
part_qwen3_ab() {
  # Qwen3-4B decode at the base build packed as bin/qwen3_base beside this
  # build, alternating, after this build's check against transformers.
  local q=/tmp/q3
  q3_checked "$q"
  for i in 1 2; do
    for bs in 1 4; do
      for b in base new; do
        bin="$g/bin/qwen3_$b"; [ -f "$bin" ] || bin="$g/bin/qwen3"
        echo "== qwen3 4b --batch $bs --decode 64 ($b, process $i)"
        timeout 120 "$bin" "$q" --batch "$bs" --decode 64 > "$W/q3_ab_b${bs}_${b}_$i.txt" 2>&1; echo "rc=$?"; grep -E "decode|host|commands" "$W/q3_ab_b${bs}_${b}_$i.txt" | head -8
      done
    done
  done
}
part_decode_ab() {
  # Qwen3-4B decode at every build packed as bin/qwen3_<name> beside this
  # one (bin/qwen3, as "new"), alternating, after this build's check
  # against transformers; DECODE_AB_ROUNDS (default 2) rounds at B = 1,
  # one at B = 4.
  local q=/tmp/q3
  q3_checked "$q"
  local bins=("$g/bin/qwen3" "$g"/bin/qwen3_*)
  for i in $(seq 1 "${DECODE_AB_ROUNDS:-2}"); do
    for bs in 1 4; do
      [ "$bs" = 4 ] && [ "$i" -gt 1 ] && continue
      for bin in "${bins[@]}"; do
        n=$(basename "$bin"); [ "$n" = qwen3 ] && n=qwen3_new
        echo "== qwen3 4b --batch $bs --decode 64 ($n, round $i)"
        timeout 120 "$bin" "$q" --batch "$bs" --decode 64 > "$W/q3_ab_b${bs}_${n}_$i.txt" 2>&1; echo "rc=$?"; grep -E "decode|host|commands" "$W/q3_ab_b${bs}_${n}_$i.txt" | head -8
      done
    done
  done
  for bin in "${bins[@]}"; do
    n=$(basename "$bin")
    echo "== $n --decode 32 --profile"
    timeout 120 "$bin" "$q" --decode 32 --profile > "$W/q3_profile_$n.txt" 2>&1; echo "rc=$?"; grep -A12 "profile of one decode step" "$W/q3_profile_$n.txt"
  done
}
part_spin() {
  # Qwen3-4B decode at B = 1 with waits that spin 50 µs (the crate's
  # default) or SPIN_LONG_US (default 20000: the whole step) before
  # blocking, alternating, two rounds; the checkpoint of decode_ab (or a
  # new one).
  local q=/tmp/q3
  q3_ready "$q"
  for i in 1 2; do
    for us in 50 "${SPIN_LONG_US:-20000}"; do
      echo "== qwen3 4b --decode 64 --wait-spin-us $us (round $i)"
      timeout 120 "$g/bin/qwen3" "$q" --decode 64 --wait-spin-us "$us" > "$W/q3_spin${us}_$i.txt" 2>&1; echo "rc=$?"; grep -E "waits|decode|host" "$W/q3_spin${us}_$i.txt" | head -6
    done
  done
}
part_attn_ab() {
  # measure/examples/attn_probe of this build and of every build packed
  # as bin/attn_probe_<name>, alternating, two rounds.
  for i in 1 2; do
    for bin in "$g/bin/attn_probe" "$g"/bin/attn_probe_*; do
      n=$(basename "$bin")
      echo "== $n (round $i)"
      timeout 120 "$bin" > "$W/${n}_$i.txt" 2>&1; echo "rc=$?"; cat "$W/${n}_$i.txt" | tail -12
    done
  done
}
part_q3var() {
  # Qwen3-4B decode at B = 1 of this build with each option set of
  # QWEN3_VARIANTS (';'-separated, e.g. "--prefetch none;--prefetch o"),
  # alternating, two rounds, then a profile of each.
  local q=/tmp/q3
  q3_ready "$q"
  IFS=';' read -r -a vars <<< "${QWEN3_VARIANTS:---prefetch none}"
  for i in 1 2; do
    for j in "${!vars[@]}"; do
      echo "== qwen3 4b --decode 64 ${vars[$j]} (round $i)"
      timeout 120 "$g/bin/qwen3" "$q" --decode 64 ${vars[$j]} > "$W/q3_var${j}_$i.txt" 2>&1; echo "rc=$?"; grep -E "decode|host" "$W/q3_var${j}_$i.txt" | head -4
    done
  done
  for j in "${!vars[@]}"; do
    echo "== qwen3 4b --decode 32 --profile ${vars[$j]}"
    timeout 120 "$g/bin/qwen3" "$q" --decode 32 --profile ${vars[$j]} > "$W/q3_var${j}_profile.txt" 2>&1; echo "rc=$?"; grep -A30 "by place" "$W/q3_var${j}_profile.txt" | head -24
  done
}
part_longctx() {
  # Decode after a prompt of 600 and 4000 tokens, this build and every
  # packed bin/qwen3_<name>, alternating (LONGCTX_ARGS: more options for
  # every run).
  local q=/tmp/q3
  q3_ready "$q"
  for p in 600 4000; do
    for bin in "$g/bin/qwen3" "$g"/bin/qwen3_*; do
      n=$(basename "$bin")
      echo "== $n: decode after a prompt of $p tokens ${LONGCTX_ARGS:-}"
      timeout 150 "$bin" "$q" --prompt-len "$p" --decode 32 ${LONGCTX_ARGS:-} > "$W/q3_pos${p}_$n.txt" 2>&1; echo "rc=$?"; grep -E "decode" "$W/q3_pos${p}_$n.txt"
    done
  done
}
part_prefill_len() {
  # Prefill time by prompt length (PREFILL_LENS, default 3 16 64 65 128
  # 512) on the default path, each in a process of its own (this build
  # and every packed bin/qwen3_<name>, alternating); then
  # PREFILL_PROFILE's lengths profiled per kernel.
  local q=/tmp/q3
  q3_ready "$q"
  for p in ${PREFILL_LENS:-3 16 64 65 128 512}; do
    for bin in "$g/bin/qwen3" "$g"/bin/qwen3_*; do
      n=$(basename "$bin")
      echo "== $n 4b --prompt-len $p --decode 8"
      timeout 120 "$bin" "$q" --prompt-len "$p" --decode 8 > "$W/q3_prefill${p}_$n.txt" 2>&1; echo "rc=$?"; grep -E "^prefill" "$W/q3_prefill${p}_$n.txt"
    done
  done
  # PREFILL_PROFILE: prompt lengths whose prefill is also profiled per kernel.
  for p in ${PREFILL_PROFILE:-}; do
    echo "== qwen3 4b --prompt-len $p --decode 4 --profile"
    timeout 120 "$g/bin/qwen3" "$q" --prompt-len "$p" --decode 4 --profile > "$W/q3_prefill${p}_profile.txt" 2>&1; echo "rc=$?"; grep -E "^prefill" "$W/q3_prefill${p}_profile.txt"; grep -A16 "profile of the prefill" "$W/q3_prefill${p}_profile.txt"
  done
}
part_chunkdiag() {
  # gpu_report's chunkdiag part, pinned as the dispatch part pins.
  local cpus=${DISPATCH_CPUS-2,3} pin=()
  [ -n "$cpus" ] && command -v taskset >/dev/null && pin=(taskset -c "$cpus")
  echo "== gpu_report --only chunkdiag (pinned to ${cpus:-none})"
  "${pin[@]}" "$g/bin/gpu_report" --only chunkdiag > "$W/chunkdiag.txt" 2>&1; echo "rc=$?"; cat "$W/chunkdiag.txt"
}
part_stats() {
  # KSTATS_ONLY: ';'-separated name prefixes, one run of --only each
  # (building every pipeline at once can take minutes).
  if [ -n "${KSTATS_ONLY:-}" ]; then
    IFS=';' read -r -a pre <<< "$KSTATS_ONLY"
    for p in "${pre[@]}"; do
      echo "== kernel_statistics --only $p"
      timeout 120 "$g/bin/kernel_statistics" --only "$p" > "$W/kernel_statistics_$p.txt" 2>&1; echo "rc=$?"
      head -40 "$W/kernel_statistics_$p.txt"
    done
    return
  fi
  echo "== kernel_statistics (VK_KHR_pipeline_executable_properties)"
  timeout 120 "$g/bin/kernel_statistics" > "$W/kernel_statistics.txt" 2>&1; echo "rc=$?"
  head -80 "$W/kernel_statistics.txt"
}
part_spread() {
  echo "== matmul spread"
  bash "$g/matmul_spread.sh" "$g" "$W" 2>&1
}
part_lprobe() {
  bash "$g/linear_probe.sh" "$g" "$W" 2>&1
}
part_matmul() {
  echo "== matmul"
  bash "$g/matmul_cmd.sh" "$g" "$W" 2>&1 | tail -80
}
for p in "$@"; do "part_$p"; done
} 2>&1 | tee "$OUT/run.log"
