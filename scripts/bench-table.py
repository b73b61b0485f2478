#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Turn tests/bench/guest.sh's CSV into the Markdown benchmark table.

  bench-table.py BENCH.csv KERNEL CPU ACCEL

CSV lines: driver,test,size,mtu,qps,rep,value,cpu_s,bytes (value in MiB/s or
usec; the memcpy and kcopy lines carry the copy ceilings in MiB/s).
"""
import csv
import os
import statistics
import sys

GOALS = ("rroce >= 2x rxe on 64 KiB and 1 MiB bandwidth (both MTUs, 1 and 4 QPs), "
         ">= rxe on every other bandwidth row; 2-byte latency <= 0.5x rxe; "
         "1 MiB bandwidth >= 25% of the kernel copy rate")


def median_iqr(vals):
    ok = sorted(v for v in vals if v is not None)
    if not ok:
        return None, None
    if len(ok) < 4:
        return statistics.median(ok), ok[-1] - ok[0]
    q = statistics.quantiles(ok, n=4)
    return statistics.median(ok), q[2] - q[0]


def goal(test, size, ratio, lat):
    """Whether a row meets the goal, or None if the goal says nothing."""
    if lat:
        return ratio <= 0.5 if size == 2 else None
    return ratio >= 2.0 if size in (65536, 1048576) else ratio >= 1.0


def print_host_idle():
    """The host's idle mode scripts/bench.sh held for the run, if it says."""
    note = os.environ.get("BENCH_HOST_IDLE_NOTE")
    if note:
        print(f"- host CPUs when idle: {note}")


def main():
    path, kernel, cpu, accel = sys.argv[1:5]
    runs = {}
    ceil = {}
    for row in csv.reader(open(path)):
        # Tables before 2026-11-29 have no tenth column (a latency run's minimum).
        drv, test, size, mtu, qps, _rep, value, cpu_s, nbytes = row[:9]
        vmin = row[9] if len(row) > 9 else ""
        if drv in ("memcpy", "kcopy"):
            ceil[drv] = float(value) if value else None
            continue
        v = None if value in ("", "fail") else float(value)
        key = (test, int(size), int(mtu), int(qps))
        r = runs.setdefault(key, {}).setdefault(drv, {"v": [], "cpu": 0.0, "bytes": 0, "min": []})
        r["v"].append(v)
        if v is not None and vmin:
            r["min"].append(float(vmin))
        if v is not None and nbytes:
            r["cpu"] += float(cpu_s)
            r["bytes"] += int(nbytes)
    kcopy = ceil.get("kcopy")
    print(f"# rroce vs rdma_rxe, {accel.upper()}\n")
    print(f"- kernel: {kernel}")
    print(f"- CPU: {cpu}; VM acceleration: {accel}")
    print_host_idle()
    print("- same VM boot, same topology (two namespaces over veth, MTU 9000, per driver), "
          "runs interleaved rroce/rxe; median of the repetitions and its interquartile "
          "range (max - min below 4 runs); bandwidth in MiB/s (perftest's MB/sec), "
          "latency the typical (median) in microseconds")
    if kcopy:
        print(f"- kernel copy rate in the VM (page cache to user, one copy per byte: the "
              f"ceiling): {kcopy:.0f} MiB/s; glibc memcpy: {ceil.get('memcpy') or 0:.0f} MB/s")
    print("- CPU-s/GiB: busy CPU-seconds of the whole guest (both sides of the transfer) "
          "per GiB moved")
    print(f"- goal: {GOALS}\n")
    print("| test | size | MTU | QPs | rroce | IQR | rxe | IQR | rroce/rxe | verdict "
          "| rroce CPU-s/GiB | rxe CPU-s/GiB | rroce / kcopy |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    met = total = 0
    for key, by in sorted(runs.items(), key=lambda kv: (not kv[0][0].endswith("bw"), kv[0])):
        test, size, mtu, qps = key
        lat = test.endswith("lat")
        unit = "us" if lat else "MiB/s"
        cells = [test, str(size), str(mtu), str(qps)]
        meds = {}
        for drv in ("rroce", "rxe"):
            d = by.get(drv, {"v": [], "cpu": 0.0, "bytes": 0})
            m, iqr = median_iqr(d["v"])
            meds[drv] = m
            fails = sum(v is None for v in d["v"])
            cells += [(f"{m:.2f} {unit}" if m is not None else "failed")
                      + (f" ({fails} failed)" if fails and m is not None else ""),
                      f"{iqr:.2f}" if iqr is not None else "-"]
        r, x = meds["rroce"], meds["rxe"]
        if r and x:
            ratio = r / x
            g = goal(test, size, ratio, lat)
            cells += [f"{ratio:.2f}", "-" if g is None else ("meets goal" if g else "below goal")]
            if g is not None:
                total += 1
                met += bool(g)
        else:
            cells += ["-", "-"]
        for drv in ("rroce", "rxe"):
            d = by.get(drv)
            cells.append(f"{d['cpu'] / (d['bytes'] / 2**30):.1f}" if d and d["bytes"] else "-")
        frac = r / kcopy if (r and kcopy and not lat) else None
        cells.append(f"{frac:.3f}" + (" (goal >= 0.25)" if size == 1048576 else "")
                     if frac is not None else "-")
        print("| " + " | ".join(cells) + " |")
    print(f"\n{met} of {total} rows with a goal meet it.")
    fast = [(k, by) for k, by in sorted(runs.items())
            if k[0].endswith("lat") and any(d.get("min") for d in by.values())]
    if fast:
        print("\nLatency fast mode: the median of the runs' minimum round trip (perftest's "
              "t_min), beside the typical above; latency in these VMs is often bimodal (under "
              "TCG a slow mode about twice the fast one, in both drivers), which a median of "
              "typicals measures as much as the driver (no goal).\n")
        print("| test | size | rroce min | rxe min | rroce/rxe |")
        print("|---|---:|---:|---:|---:|")
        for (test, size, _mtu, _qps), by in fast:
            m = {drv: median_iqr(by.get(drv, {}).get("min", []))[0] for drv in ("rroce", "rxe")}
            r, x = m["rroce"], m["rxe"]
            cells = [test, str(size)] + [f"{v:.2f} us" if v is not None else "-" for v in (r, x)]
            cells.append(f"{r / x:.2f}" if r and x else "-")
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
