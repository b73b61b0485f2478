#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
# make profile UML=1, on the host: reads the samples of `perf script
# --show-mmap-events -F comm,tid,time,ip,sym,dso` ($RUN/perf.script, perf
# on every host CPU with the realtime clock) and keeps each driver's run window ($RUN/DRIVER-WORKLOAD.t0,
# .t1, written by tests/bench/uml-profile.sh). UML's kernel threads are
# the host program "linux": their samples in its text are the UML kernel's
# symbols (rdma_rxe is built in, so its functions are named); those in
# UML's memory file at rroce.ko's addresses are named from the guest's
# /proc/kallsyms; the host kernel's samples for them are what UML itself
# costs (its interrupt masking is a host sigprocmask). The guest's
# processes are the host's "uml-userspace" stubs.
#
# With call chains (perf record -g; the UML kernel has frame pointers, see
# kernel/uml.config) every sample's stack is folded too, and each driver's
# run becomes a flame graph ($RUN/DRIVER-WORKLOAD.svg,
# tests/bench/flamegraph.py): host kernel frames ("host:"), UML kernel
# frames ("uml:", rdma_rxe among them), rroce.ko's ("rroce:", demangled),
# the guest's processes as one frame and the host's idle CPUs as "idle"
# (nothing runnable on that CPU: UML's vCPUs and the guest's processes
# all waiting).
import bisect
import collections
import os
import re
import subprocess
import sys

run = sys.argv[1]
top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
# rroce.ko's functions (text symbols), by address; the module's text ends
# within 64 KiB of its last one.
mods = sorted((int(p[0], 16), p[2]) for p in
              (l.split() for l in open(f"{run}/kallsyms"))
              if len(p) == 4 and p[3] == "[rroce]" and p[1] in "tT")
addrs = [a for a, _ in mods]
lo, hi = (addrs[0], addrs[-1] + (64 << 10)) if addrs else (0, 0)


def demangled(names):
    """Rust's mangled names as paths (binutils' c++filt reads Rust's v0
    scheme), without crate hashes and this crate's own name; the names
    unchanged if c++filt is missing."""
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                             text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return list(names)
    if len(out) != len(names):
        return list(names)
    return [re.sub(r"\[[0-9a-f]+\]", "", n).replace("rroce_main::", "") for n in out]


mods = list(zip(addrs, demangled([n for _, n in mods])))
# The runs: DRIVER-WORKLOAD, in uml-profile.sh's order ($RUN/workloads).
RUNS = dict(l.rstrip("\n").split("|", 1) for l in open(f"{run}/workloads") if "|" in l)
win = {}
what = {}
for w, desc in RUNS.items():
    for drv in ("rroce", "rxe"):
        d = f"{drv}-{w}"
        what[d] = desc
        try:
            win[d] = (float(open(f"{run}/{d}.t0").read()), float(open(f"{run}/{d}.t1").read()))
        except (OSError, ValueError):
            print(f"\n## {drv}, {desc}: the run failed, no profile\n")
res = {d: collections.Counter() for d in win}
cat = {d: collections.Counter() for d in win}
fold = {d: collections.Counter() for d in win}
tot = collections.Counter()
# One sample: "comm tid time: ip sym (dso)" on one line, or (with call
# chains) "comm tid time:" and one indented "ip sym (dso)" line per frame,
# innermost first, up to a blank line.
head = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+(\d+\.\d+):\s*(.*)$")
frame = re.compile(r"^\s*([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$")


# UML's memory is one host file (/dev/shm/#N, deleted) that the UML
# kernel maps: once linearly, and page by page wherever vmalloc puts
# memory (rroce.ko among it). In a call chain perf prints such a frame as
# its offset in that file, not its address: the pages mapped inside the
# module's range (perf's PERF_RECORD_MMAP2 lines, read in time order)
# turn an offset back into the address kallsyms names.
mmap = re.compile(r"PERF_RECORD_MMAP2? .*\[(0x[0-9a-f]+)\((0x[0-9a-f]+)\) @ (0x[0-9a-f]+) ")
page_va = {}


def on_mmap(line):
    m = mmap.search(line)
    if not m or not line.lstrip().startswith("linux "):
        return
    start, size, off = (int(x, 16) for x in m.groups())
    if start + size <= lo or start >= hi:
        return
    for p in range(0, size, 4096):
        page_va[(off + p) >> 12] = start + p


def module_ip(ip):
    """`ip` as an address in rroce.ko's range, or None."""
    if lo <= ip < hi:
        return ip
    va = page_va.get(ip >> 12)
    return None if va is None else va + (ip & 4095)


def name_of(comm, ip, sym, dso):
    """A frame's name and the part of the system it belongs to."""
    base = dso.rsplit("/", 1)[-1]
    user = comm == "uml-userspace"
    if comm == "swapper":
        return "host:" + sym, "host CPU idle (nothing to run)"
    if "kernel.kallsyms" in dso:
        c = "host kernel, for guest processes" if user else "host kernel, for the UML kernel"
        return "host:" + sym, c
    if user:
        return "guest user space", "guest user space (perftest, libibverbs, provider)"
    mip = module_ip(ip) if "deleted" in dso else None
    if mip is not None:
        return "rroce:" + mods[bisect.bisect_right(addrs, mip) - 1][1], "rroce.ko"
    if base == "linux":
        return "uml:" + sym, "UML kernel (IP stack, copies, rdma_rxe, ...)"
    return f"{base}:{sym}", f"host {base}, for the UML kernel"


def sample(comm, t, frames):
    """Counts one sample (frames innermost first) in its driver's window."""
    d = next((k for k, (a, b) in win.items() if a <= t <= b), None)
    if d is None or not frames:
        return
    if comm == "perf" or comm.startswith("perf-"):
        return
    tot[d] += 1
    named = [name_of(comm, *f) for f in frames]
    name, c = named[0]
    res[d][name] += 1
    cat[d][c] += 1
    if comm == "swapper":
        stack = ["idle"]
    elif comm == "uml-userspace":
        # The guest's processes: one frame, with the host kernel's work
        # for them above it.
        stack = ["guest processes"] + [n for n, _ in reversed(named) if n.startswith("host:")]
    elif comm == "linux":
        stack = ["UML kernel"] + [n for n, _ in reversed(named)]
    else:
        stack = [f"host {comm}"] + [n for n, _ in reversed(named)]
    # Consecutive repeats (the guest user space's frames) fold into one;
    # a frame perf could place nowhere (the bottom of UML's thread stacks)
    # says nothing.
    stack = [f for f in stack if f != "[unknown]:[unknown]"]
    stack = [f for i, f in enumerate(stack) if i == 0 or f != stack[i - 1]]
    fold[d][";".join(stack)] += 1


cur = None
for line in open(f"{run}/perf.script", errors="replace"):
    if "PERF_RECORD_MMAP" in line:
        on_mmap(line)
        continue
    if not line.strip():
        if cur:
            sample(*cur)
        cur = None
        continue
    m = head.match(line)
    if m:
        if cur:
            sample(*cur)
        comm, _, t, rest = m.groups()
        cur = (comm, float(t), [])
        f = frame.match(rest) if rest else None
        if f:
            cur[2].append((int(f.group(1), 16), f.group(2), f.group(3)))
        continue
    f = frame.match(line)
    if f and cur:
        cur[2].append((int(f.group(1), 16), f.group(2), f.group(3)))
if cur:
    sample(*cur)
chains = any(";" in k for c in fold.values() for k in c)
if chains:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import flamegraph

    for d, c in fold.items():
        with open(f"{run}/{d}.folded", "w") as f:
            for k, n in sorted(c.items()):
                f.write(f"{k} {n}\n")
        try:
            bw = open(f"{run}/{d}.bw").read().strip()
        except OSError:
            bw = "?"
        with open(f"{run}/{d}.svg", "w") as f:
            drv = d.split("-")[0]
            f.write(flamegraph.svg(
                c, f"{drv}: {what[d]}, User-Mode Linux ({bw})",
                f"host perf, cpu-clock at 1999 Hz on every host CPU, {tot[d]} samples; "
                "host: host kernel, uml: UML kernel, rroce: rroce.ko"))
for d, (a, b) in win.items():
    n = tot[d] or 1
    try:
        bw = open(f"{run}/{d}.bw").read().strip()
    except OSError:
        bw = "?"
    print(f"\n## {d.split('-')[0]}: {what[d]}: {bw}, "
          f"{b - a:.2f} s, {tot[d]} samples\n")
    print("| where | share |\n|---|---:|")
    for c, k in cat[d].most_common():
        print(f"| {c} | {100 * k / n:.1f}% |")
    print(f"\n| symbol (top {top}) | share |\n|---|---:|")
    for s, k in res[d].most_common(top):
        print(f"| `{s}` | {100 * k / n:.1f}% |")
