#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Turn tests/bench/guest.sh's CSV into the Markdown benchmark table.

  bench-table.py BENCH.csv KERNEL CPU ACCEL
"""
import csv
import statistics
import sys

GOALS = "rroce >= rxe on every row; 64 KiB bandwidth >= 1.5x rxe; 2-byte write latency <= 0.7x rxe"


def main():
    path, kernel, cpu, accel = sys.argv[1:5]
    runs = {}
    memcpy = None
    for drv, test, size, _rep, value in csv.reader(open(path)):
        if drv == "memcpy":
            memcpy = float(value)
            continue
        v = None if value in ("", "fail") else float(value)
        runs.setdefault((test, int(size)), {}).setdefault(drv, []).append(v)

    def stat(vals):
        ok = [v for v in vals if v is not None]
        if not ok:
            return None, None, len(vals)
        return statistics.median(ok), (max(ok) - min(ok)), len(vals) - len(ok)

    print(f"# rroce vs rdma_rxe, {accel.upper()}\n")
    print(f"- kernel: {kernel}; CPU: {cpu}; VM acceleration: {accel}")
    print("- same VM boot, same topology (two namespaces over veth per driver), "
          "runs interleaved rroce/rxe; median of the repetitions, spread = max - min")
    if memcpy:
        print(f"- memcpy bandwidth in the VM (the ceiling): {memcpy:.0f} MB/s")
    print(f"- goal: {GOALS}\n")
    print("| test | size | rroce | spread | rxe | spread | rroce/rxe | verdict | rroce / memcpy |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for (test, size), by in sorted(runs.items(), key=lambda kv: (not kv[0][0].endswith("bw"), kv[0])):
        lat = test.endswith("lat")
        unit = "us" if lat else "MB/s"
        r, rs, rf = stat(by.get("rroce", []))
        x, xs, xf = stat(by.get("rxe", []))
        cells = [test, str(size)]
        cells += [f"{r:.2f} {unit}" if r is not None else "failed", f"{rs:.2f}" if rs is not None else "-"]
        cells += [f"{x:.2f} {unit}" if x is not None else "failed", f"{xs:.2f}" if xs is not None else "-"]
        if r and x:
            ratio = r / x
            good = ratio <= 1.0 if lat else ratio >= 1.0
            if not lat and size == 65536:
                good = ratio >= 1.5
            if lat and size == 2 and test == "ib_write_lat":
                good = ratio <= 0.7
            cells += [f"{ratio:.2f}", "meets goal" if good else "below goal"]
        else:
            cells += ["-", "-"]
        cells.append(f"{r / memcpy:.3f}" if (r and memcpy and not lat) else "-")
        if rf or xf:
            cells[-2] += f" ({rf} rroce / {xf} rxe runs failed)"
        print("| " + " | ".join(cells) + " |")


main()
