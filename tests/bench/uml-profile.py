#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
# make profile UML=1, on the host: reads the samples of `perf script -F
# comm,tid,time,ip,sym,dso` ($RUN/perf.script, perf on every host CPU with
# the realtime clock) and keeps each driver's run window ($RUN/DRIVER.t0,
# .t1, written by tests/bench/uml-profile.sh). UML's kernel threads are
# the host program "linux": their samples in its text are the UML kernel's
# symbols (rdma_rxe is built in, so its functions are named); those in
# UML's memory file at rroce.ko's addresses are named from the guest's
# /proc/kallsyms; the host kernel's samples for them are what UML itself
# costs (its interrupt masking is a host sigprocmask). The guest's
# processes are the host's "uml-userspace" stubs.
import bisect
import collections
import re
import sys

run = sys.argv[1]
top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
mods = sorted((int(p[0], 16), p[2]) for p in
              (l.split() for l in open(f"{run}/kallsyms")) if len(p) == 4 and p[3] == "[rroce]")
addrs = [a for a, _ in mods]
lo, hi = (addrs[0], addrs[-1] + (1 << 20)) if addrs else (0, 0)
win = {}
for d in ("rroce", "rxe"):
    try:
        win[d] = (float(open(f"{run}/{d}.t0").read()), float(open(f"{run}/{d}.t1").read()))
    except (OSError, ValueError):
        print(f"\n## {d}: its run failed, no profile\n")
res = {d: collections.Counter() for d in win}
cat = {d: collections.Counter() for d in win}
tot = collections.Counter()
pat = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+(\d+\.\d+):\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$")
for line in open(f"{run}/perf.script", errors="replace"):
    m = pat.match(line)
    if not m:
        continue
    comm, _, t, ip, sym, dso = m.groups()
    t, ip = float(t), int(ip, 16)
    d = next((k for k, (a, b) in win.items() if a <= t <= b), None)
    if d is None:
        continue
    tot[d] += 1
    base = dso.rsplit("/", 1)[-1]
    user = comm == "uml-userspace"
    if "kernel.kallsyms" in dso:
        name = "host:" + sym
        c = "host kernel, for guest processes" if user else "host kernel, for the UML kernel"
    elif user:
        name, c = "guest user space", "guest user space (perftest, libibverbs, provider)"
    elif lo <= ip < hi and "deleted" in dso:
        name, c = "rroce:" + mods[bisect.bisect_right(addrs, ip) - 1][1], "rroce.ko"
    elif base == "linux":
        name, c = "uml:" + sym, "UML kernel (IP stack, copies, rdma_rxe, ...)"
    else:
        name, c = f"{base}:{sym}", f"host {base}, for the UML kernel"
    res[d][name] += 1
    cat[d][c] += 1
for d, (a, b) in win.items():
    n = tot[d] or 1
    try:
        bw = open(f"{run}/{d}.bw").read().strip()
    except OSError:
        bw = "?"
    print(f"\n## {d}: 64 KiB ib_send_bw, MTU 1024, 1 QP, 3000 messages: {bw} MiB/s, "
          f"{b - a:.2f} s, {tot[d]} samples\n")
    print("| where | share |\n|---|---:|")
    for c, k in cat[d].most_common():
        print(f"| {c} | {100 * k / n:.1f}% |")
    print(f"\n| symbol (top {top}) | share |\n|---|---:|")
    for s, k in res[d].most_common(top):
        print(f"| `{s}` | {100 * k / n:.1f}% |")
