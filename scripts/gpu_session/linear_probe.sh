#!/usr/bin/env bash
# lprobe part of session.sh: $1 = kit dir, $2 = work dir. The skinny
# linear kernel's experimental variants in $1/lprobe/NAME.spv (R and MT in
# LPROBE_VARIANTS as NAME:R:MT[:UPW], compiled by the command in the run's
# README) beside the built-in kernels (measure/examples/linear_probe);
# LPROBE_ARGS: more options (--copies C).
g=$1; W=$2
args=()
for v in ${LPROBE_VARIANTS:-}; do args+=("$g/lprobe/$v"); done
echo "== linear_probe ${LPROBE_ARGS:-} ${LPROBE_SHAPES:+--shapes $LPROBE_SHAPES}"
timeout 400 "$g/bin/linear_probe" ${LPROBE_ARGS:-} ${LPROBE_SHAPES:+--shapes "$LPROBE_SHAPES"} "${args[@]}" > "$W/linear_probe.txt" 2>&1; echo "rc=$?"
cat "$W/linear_probe.txt"
