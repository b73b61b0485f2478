#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Hold the task_struct of each given task until stdin closes.

  taskpin.py PID... <FIFO

A per-task perf event holds a reference on its task (perf_event_alloc takes
one for the event's target) until the event is closed, so the task_struct
outlives the task's exit while this runs. t67 uses it around ksmbd's
shutdown: see smb_down there.

Prints "pinned N" once every event is open; exits 1 if one could not be.
"""
import ctypes
import os
import struct
import sys

SYS_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}[os.uname().machine]
PERF_TYPE_SOFTWARE = 1
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_ATTR_SIZE_VER0 = 64
LIBC = ctypes.CDLL(None, use_errno=True)


def perf_event_open(pid):
    # struct perf_event_attr, version 0: type, size, config, then zeros
    # (sample period, flags: the event is enabled, counts the task only).
    attr = struct.pack("=IIQ", PERF_TYPE_SOFTWARE, PERF_ATTR_SIZE_VER0,
                       PERF_COUNT_SW_TASK_CLOCK).ljust(PERF_ATTR_SIZE_VER0, b"\0")
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = LIBC.syscall(SYS_PERF_EVENT_OPEN, buf, pid, -1, -1, 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), f"perf_event_open on {pid}")
    return fd


def main():
    fds = []
    try:
        for pid in sys.argv[1:]:
            fds.append(perf_event_open(int(pid)))
    except OSError as e:
        print(e, file=sys.stderr)
        return 1
    print(f"pinned {len(fds)}", flush=True)
    sys.stdin.read()
    for fd in fds:
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
