#!/usr/bin/env python3
"""Compares the rows of `gpu_report --json` runs of two builds, as ratios to
the floor measured in the same process.

    python3 scripts/compare_dispatch.py --base b1.json b2.json b3.json \
        --new n1.json n2.json n3.json [--limit 0.03] [--no-base TEXT ...]

For each row that has a floor, the ratio ours / floor is taken within each
process; the figure of a build is the median of its processes' ratios. A row
whose new median ratio exceeds the base's by more than --limit is reported
as a regression and the script exits 1. Rows present in one build only are
listed (new rows have no base to compare with). Prints a Markdown table,
with each side's own figures beside the ratios (medians over the
processes of ours and of the floor): a ratio that moves while ours does
not is the floor's doing. Rows whose name contains a --no-base text are
listed as new rows whatever the base printed (a base built without the
feature they time: scripts/gpu_session/dispatch_base.sh's fac9bce build
records its auto-barrier rows with manual barriers).
"""
import argparse
import json
import statistics
import sys


def ratios(paths):
    """Row name -> list of ours/floor ratios (one per process), units, and
    row name -> (list of ours, list of floors)."""
    out, units, sides = {}, {}, {}
    for p in paths:
        with open(p) as f:
            doc = json.load(f)
        for r in doc.get("rows", []):
            if r.get("floor") in (None, 0) or r.get("ours") is None:
                continue
            out.setdefault(r["name"], []).append(r["ours"] / r["floor"])
            units[r["name"]] = r.get("unit", "")
            o, fl = sides.setdefault(r["name"], ([], []))
            o.append(r["ours"])
            fl.append(r["floor"])
    return out, units, sides


def fmt3(v):
    """A figure to three decimals, or a dash."""
    return "—" if v is None else "%.3f" % v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", nargs="+", required=True)
    ap.add_argument("--new", nargs="+", required=True)
    ap.add_argument("--limit", type=float, default=0.03)
    ap.add_argument("--no-base", nargs="*", default=[])
    a = ap.parse_args()
    base, units, base_sides = ratios(a.base)
    for name in [n for n in base if any(t in n for t in a.no_base)]:
        del base[name]
        del base_sides[name]
    new, units_new, new_sides = ratios(a.new)
    units.update(units_new)
    worse = []
    print("| row | unit | base ratio (median of %d) | new ratio (median of %d) | new − base | within %.2f "
          "| ours, base → new (medians) | floor, base → new (medians) |"
          % (len(a.base), len(a.new), a.limit))
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")

    def side(name, i):
        b = statistics.median(base_sides[name][i]) if name in base_sides else None
        n = statistics.median(new_sides[name][i]) if name in new_sides else None
        return f"{fmt3(b)} → {fmt3(n)}"

    for name in list(base) + [n for n in new if n not in base]:
        b = statistics.median(base[name]) if name in base else None
        n = statistics.median(new[name]) if name in new else None
        sides = f"{side(name, 0)} | {side(name, 1)}"
        if b is not None and n is not None:
            d = n - b
            ok = d <= a.limit
            if not ok:
                worse.append(name)
            print(f"| {name} | {units[name]} | {fmt3(b)} | {fmt3(n)} | {d:+.3f} | {'yes' if ok else 'NO'} | {sides} |")
        else:
            print(f"| {name} | {units[name]} | {fmt3(b)} | {fmt3(n)} | — | {'new row' if b is None else 'row gone'} | {sides} |")
    if worse:
        print(f"\n{len(worse)} row(s) worse than the base by more than {a.limit}: {', '.join(worse)}")
        sys.exit(1)
    print(f"\nevery row within {a.limit} of the base")


if __name__ == "__main__":
    main()
