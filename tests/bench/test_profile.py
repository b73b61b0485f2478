#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
# make check: tests/bench/uml-profile.py and flamegraph.py on a small
# recorded-style input (no UML, no perf): a frame perf printed as an
# offset in UML's memory file is named after the rroce.ko function the
# page mapping puts it in (and one no mapping covers is not), stacks fold
# caller first, each run's samples stay in its window, and the flame graph
# is well-formed SVG whose boxes carry those names and shares.
# Prints "ok" lines and exits non-zero on the first failure.
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True

# rroce.ko at 0xe0840000: two functions (one mangled, as kallsyms has it).
KALLSYMS = """\
00000000e0840000 t _RNvNtNtCs15obVmsQdrg_10rroce_main6engine4icrc8crc32_le\t[rroce]
00000000e0841000 t rroce_helper_tx_send\t[rroce]
00000000e0843000 d some_data\t[rroce]
ffffffff81000000 T _stext
"""
# The module's first page is UML memory file offset 0x7e3fe000, its second
# 0x1234000; offset 0x5555000 is mapped somewhere else (not the module).
MMAPS = """\
linux 100 [000] 99.000000: PERF_RECORD_MMAP2 100/100: [0x61000000(0x7f000000) @ 0x1000000 00:1b 43 1]: rwxs /dev/shm/#43 (deleted)
linux 100 [000] 99.000001: PERF_RECORD_MMAP2 100/100: [0xe0840000(0x1000) @ 0x7e3fe000 00:1b 43 1]: rwxs /dev/shm/#43 (deleted)
linux 100 [000] 99.000002: PERF_RECORD_MMAP2 100/100: [0xe0841000(0x1000) @ 0x1234000 00:1b 43 1]: rwxs /dev/shm/#43 (deleted)
linux 100 [000] 99.000003: PERF_RECORD_MMAP2 100/100: [0xd0000000(0x1000) @ 0x5555000 00:1b 43 1]: rwxs /dev/shm/#43 (deleted)
"""


def chain(comm, t, frames):
    out = [f"{comm} 101 {t:.6f}:"]
    out += [f"\t{ip:16x} {sym} ({dso})" for ip, sym, dso in frames]
    return "\n".join(out) + "\n\n"


SHM = "/dev/shm/#43 (deleted)"
UML = "/tmp/linux"
SCRIPT = MMAPS
# rroce's send run, 100.0 .. 101.0: three samples in crc32_le (called from
# tx_send, called from the UML kernel's syscall), one in tx_send itself,
# one at an unmapped offset, two idle.
for i in range(3):
    SCRIPT += chain("linux", 100.1 + i * 0.01, [
        (0x7e3fe010, "[unknown]", SHM),
        (0x1234040, "[unknown]", SHM),
        (0x600100, "handle_syscall", UML),
    ])
SCRIPT += chain("linux", 100.2, [(0x1234080, "[unknown]", SHM), (0x600100, "handle_syscall", UML)])
SCRIPT += chain("linux", 100.3, [(0x5555010, "[unknown]", SHM), (0x600100, "handle_syscall", UML)])
SCRIPT += chain("swapper", 100.4, [(0xffffffff81000010, "pv_native_safe_halt", "[kernel.kallsyms]")])
SCRIPT += chain("swapper", 100.5, [(0xffffffff81000010, "pv_native_safe_halt", "[kernel.kallsyms]")])
# Outside every window: counted nowhere.
SCRIPT += chain("linux", 50.0, [(0x7e3fe010, "[unknown]", SHM)])
# rxe's send run, 102.0 .. 103.0: one sample in the UML kernel's rxe code.
SCRIPT += chain("linux", 102.5, [(0x600200, "rxe_requester", UML), (0x600300, "do_work", UML)])


def fail(msg):
    print(f"not ok: {msg}")
    sys.exit(1)


def main():
    with tempfile.TemporaryDirectory() as run:
        def put(name, text):
            with open(os.path.join(run, name), "w") as f:
                f.write(text)

        put("kallsyms", KALLSYMS)
        put("perf.script", SCRIPT)
        put("workloads", "send65536|64 KiB ib_send_bw, MTU 1024, 1 QP, 3000 messages\n")
        for d, (a, b, bw) in {"rroce-send65536": (100.0, 101.0, "90.5 MiB/s"),
                              "rxe-send65536": (102.0, 103.0, "39.0 MiB/s")}.items():
            put(f"{d}.t0", f"{a}\n")
            put(f"{d}.t1", f"{b}\n")
            put(f"{d}.bw", f"{bw}\n")
        out = subprocess.run([sys.executable, os.path.join(HERE, "uml-profile.py"), run],
                             capture_output=True, text=True)
        if out.returncode != 0:
            fail(f"uml-profile.py exited {out.returncode}: {out.stderr.strip()}")
        text = out.stdout
        if "## rroce: 64 KiB ib_send_bw, MTU 1024, 1 QP, 3000 messages: 90.5 MiB/s, 1.00 s, 7 samples" not in text:
            fail("rroce's run header (7 samples in its window):\n" + text)
        if "1 samples" not in text.split("## rxe:")[1].split("\n")[0]:
            fail("rxe's run has its one sample")
        # The leaf table: 3 of 7 samples in the demangled crc32_le (or the
        # mangled name where c++filt is missing), 1 in tx_send.
        crc = re.search(r"\| `rroce:(engine::icrc::crc32_le|_RNv\S+crc32_le)` \| 42\.9% \|", text)
        if not crc:
            fail("crc32_le named from its file offset, 3 of 7 samples:\n" + text)
        print("ok 1 - a frame at a file offset is named after its rroce.ko function")
        if "| `rroce:rroce_helper_tx_send` | 14.3% |" not in text:
            fail("tx_send's own sample")
        if "rroce.ko | 57.1% |" not in text:
            fail("the rroce.ko category holds the four module samples")
        if "host CPU idle (nothing to run) | 28.6% |" not in text:
            fail("the idle samples have their category")
        print("ok 2 - shares by function and by part of the system")
        folded = open(os.path.join(run, "rroce-send65536.folded")).read().splitlines()
        want = f"UML kernel;uml:handle_syscall;rroce:rroce_helper_tx_send;rroce:{crc.group(1)} 3"
        if want not in folded:
            fail(f"folded stack caller first: {want!r} not in {folded!r}")
        # The unmapped offset is UML memory, not rroce.ko.
        if not any(ln.startswith("UML kernel;uml:handle_syscall;#43 (deleted):[unknown] ")
                   for ln in folded):
            fail(f"an offset outside the module's pages stays unnamed: {folded!r}")
        if "idle 2" not in folded:
            fail("idle folds into one frame")
        print("ok 3 - stacks fold caller first; an unmapped offset is not the module")
        svg = open(os.path.join(run, "rroce-send65536.svg")).read()
        root = ET.fromstring(svg)
        ns = "{http://www.w3.org/2000/svg}"
        titles = [t.text for t in root.iter(f"{ns}title")]
        if "rroce:rroce_helper_tx_send (4 samples, 57.14%)" not in titles:
            fail(f"the SVG has a box per frame with its samples: {titles!r}")
        rects = {g.find(f"{ns}title").text: float(g.find(f"{ns}rect").get("width"))
                 for g in root.iter(f"{ns}g")}
        whole = rects["UML kernel (5 samples, 71.43%)"]
        part = rects["rroce:rroce_helper_tx_send (4 samples, 57.14%)"]
        if abs(part / whole - 0.8) > 1e-3:
            fail(f"box widths follow samples: {part} / {whole}")
        print("ok 4 - the flame graph is SVG, one box per frame, as wide as its samples")


if __name__ == "__main__":
    main()
