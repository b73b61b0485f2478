#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Turn tests/bench/ab.sh's CSV into a Markdown A/B table.

  bench-ab.py AB.csv PARAM KERNEL ACCEL

CSV lines: side,test,size,mtu,qps,rep,value (side A: the module parameter
on, B: off; value in MiB/s or usec). PARAM "base-COMMIT" (make bench-ab
BASE=COMMIT): A is this tree's module, B that commit's.
"""
import csv
import importlib.util
import pathlib
import sys


# The table's own median and interquartile range (scripts/bench-table.py).
_spec = importlib.util.spec_from_file_location(
    "bench_table", pathlib.Path(__file__).resolve().parent / "bench-table.py")
_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_table)
median_iqr = _table.median_iqr


def main():
    path, param, kernel, accel = sys.argv[1:5]
    runs = {}
    order = []
    for side, test, size, mtu, qps, _rep, value in csv.reader(open(path)):
        key = (test, int(size), int(mtu), int(qps))
        if key not in runs:
            order.append(key)
        v = None if value in ("", "fail") else float(value)
        runs.setdefault(key, {"A": [], "B": []})[side].append(v)
    if param.startswith("base-"):
        commit = param[len("base-"):]
        print(f"# rroce A/B: this tree (A) against commit {commit} (B), {accel.upper()}\n")
        cols = ("A: tree", f"B: {commit}")
    else:
        print(f"# rroce A/B: module parameter {param} on (A) and off (B), {accel.upper()}\n")
        cols = ("A: on", "B: off")
    print(f"- kernel: {kernel}; VM acceleration: {accel}")
    _table.print_host_idle()
    print("- same VM boot and topology as `make bench`; runs interleaved A/B; median of "
          "the repetitions and its interquartile range (max - min below 4 runs); "
          "bandwidth in MiB/s, latency the typical (median) in microseconds; "
          "A/B above 1 is better for bandwidth, below 1 for latency\n")
    print(f"| row | {cols[0]} | {cols[1]} | A/B |")
    print("|---|---|---|---|")
    for key in order:
        test, size, mtu, qps = key
        lat = test.endswith("_lat")
        a, ai = median_iqr(runs[key]["A"])
        b, bi = median_iqr(runs[key]["B"])
        name = f"{test} {size} B, MTU {mtu}" + ("" if lat else f", {qps} QP" + ("s" if qps > 1 else ""))
        fmt = (lambda m, i: "fail" if m is None else f"{m:.2f} ({i:.2f})")
        ratio = "" if not a or not b else f"{a / b:.2f}"
        print(f"| {name} | {fmt(a, ai)} | {fmt(b, bi)} | {ratio} |")


if __name__ == "__main__":
    main()
