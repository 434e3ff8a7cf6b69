#!/usr/bin/env bash
# Builds the dispatch rows' base with this checkout's harness: measure/
# (gpu_report, the floor, the rules) as it is here, built against the
# library at a base commit (default fac9bce, the commit the dispatch rows
# compare with), so that both builds time the same harness and the same
# floor and differ only in the library. fac9bce has no automatic barriers:
# dispatch_base_fac9bce.diff turns the harness's auto-barrier rows into
# manual ones there (those rows then compare nothing). Writes
# /tmp/gpu_report_base; pack it with
#   EXTRA="/tmp/gpu_report_base=gpu_report_base target/release/examples/gpu_report=gpu_report_new" \
#     bash scripts/gpu_session/pack.sh "" ""
# after `cargo build --release -p vkcompute-measure --example gpu_report`.
# Usage: bash scripts/gpu_session/dispatch_base.sh [COMMIT]
# BASE_DIFF names the patch for the harness at COMMIT (default
# dispatch_base_COMMIT.diff where it exists: another commit without
# automatic barriers takes the fac9bce one, e.g. BASE_DIFF=
# scripts/gpu_session/dispatch_base_fac9bce.diff for 761b61f, the end of
# the layer moves before the correctness work merged); BASE_BIN the output
# (default /tmp/gpu_report_base); BASE_TARGET a cargo target folder that
# several such builds share (dependencies compiled once: about 20 s a
# commit after the first), as for a bisection over several commits:
#   for c in 067b761 6c95eb1; do BASE_TARGET=/tmp/bis-target \
#     BASE_BIN=/tmp/gpu_report_$c bash scripts/gpu_session/dispatch_base.sh $c; done
# (commits before 410cb1d, which has no automatic barriers, need
# BASE_DIFF=scripts/gpu_session/dispatch_base_fac9bce.diff).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
base=${1:-fac9bce}
wt=${BASE_TREE:-/tmp/vkcompute-base-$base}
[ -d "$wt" ] || git worktree add --detach "$wt" "$base" >/dev/null
rm -rf "$wt/measure"
cp -r measure "$wt/measure"
grep -q '"measure"' "$wt/Cargo.toml" ||
  sed -i 's/^members = \[".", "peers"\]/members = [".", "measure", "peers"]/' "$wt/Cargo.toml"
diff=${BASE_DIFF:-$root/scripts/gpu_session/dispatch_base_$base.diff}
case $diff in /*) ;; *) diff="$root/$diff" ;; esac
bin=${BASE_BIN:-/tmp/gpu_report_base}
[ ! -f "$diff" ] || (cd "$wt" && patch -s -p1 < "$diff")
tdir=${BASE_TARGET:-$wt/target}
(cd "$wt" && CARGO_TARGET_DIR="$tdir" cargo build --release -p vkcompute-measure --example gpu_report)
cp "$tdir/release/examples/gpu_report" "$bin"
echo "dispatch base: $bin (library at $base, harness of $(git rev-parse --short HEAD))"
