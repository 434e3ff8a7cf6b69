#!/usr/bin/env python3
"""One markdown table from a GPU run: vkcompute (measure/examples/gpu_report's JSON,
with the hand-written ash floor and CUDA columns it carries) beside the peers
(peers_report's JSON: wgpu, scry-gpu, and the floor run in the peers' own
process), with ratios ours / other, and each peer's ratio to the floor of
its own process (`p/own floor`: host-side figures move between processes,
so that ratio, not a cross-process one, says how a peer compares with the
driver).

    python3 scripts/perf_table.py report.json peers.json > table.md

Ratios are ours divided by the other figure, for every unit: for times
(µs, ms) below 1.00x is better, for rates (GB/s) above 1.00x is better.
"""
import json
import sys


import re

# gpu_report rows whose peers_report row has another name.
RENAMES = {
    "round trip, whole: new batch + record + submit → wait": "round trip, spin then block (default)",
    "round trip, submit → wait, blocking wait, back-to-back": "round trip, blocking wait",
}


def key(name):
    # "saxpy 64 Mi f32, vec4, shape by rule (...)" pairs with the peers'
    # "saxpy 64 Mi f32, vec4"; "chain of 1000, per dispatch, one
    # submission" (wall) with the peers' "chain of 1000, per dispatch"
    # (they record all and submit once too).
    name = RENAMES.get(name, name)
    name = re.sub(r", (best shape|shape by rule.*)$", "", name)
    return name.replace(", one submission", "")


def fmt(v):
    if v is None:
        return "—"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "—"
    return f"{a / b:.2f}×"


def main():
    report = json.load(open(sys.argv[1]))
    peers = json.load(open(sys.argv[2])) if len(sys.argv) > 2 else {"rows": [], "peers": {}}
    names = [p for p in peers.get("peers", {}).keys() if p != "floor"]
    own_floor = "floor" in peers.get("peers", {})
    prow = {}
    for r in peers["rows"]:
        prow[(key(r["name"]), r["clock"])] = r
    print(f"Adapter: {report.get('adapter')} ({report.get('driver')})")
    for p in names:
        print(f"- {p} {peers['peers'][p].get('version', '')}: {peers['peers'][p].get('setup', '')}")
    print()
    head = ["workload", "clock", "vkcompute", "ash floor", "/floor", "CUDA", "/CUDA"]
    if own_floor:
        head += ["floor (peers' process)"]
    for p in names:
        head += [p, f"/{p}"] + ([f"{p}/own floor"] if own_floor else [])
    head.append("goal")
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for r in report["rows"]:
        ours = r.get("ours")
        cells = [f"{r['name']} ({r['unit']})", r["clock"], fmt(ours),
                 fmt(r.get("floor")), ratio(ours, r.get("floor")),
                 fmt(r.get("cuda")), ratio(ours, r.get("cuda"))]
        pr = prow.get((key(r["name"]), r["clock"]))
        if own_floor:
            f = pr.get("floor") if pr else None
            cells.append(fmt(f.get("value") if f else None))
        for p in names:
            cell = pr.get(p) if pr else None
            v = cell.get("value") if cell else None
            if v is None and cell and cell.get("na"):
                cells += ["n/a", "—"]
            else:
                cells += [fmt(v), ratio(ours, v)]
            if own_floor:
                rf = cell.get("ratio_to_floor") if cell else None
                cells.append(f"{rf:.2f}×" if rf is not None else "—")
        cells.append(r.get("goal") or "")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
