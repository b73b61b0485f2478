#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Parse KUnit KTAP output from a kernel log.

Usage: ktap.py DMESG_FILE [EXPECTED_SUITE ...]

Prints one line per test case ("kunit: ok suite.case" / "kunit: not ok
suite.case ...") and per problem (a failed, crashed or missing suite), then
"kunit: P ok, F not ok". Exit status 0 only if every expected suite ran to
completion and every case passed.
"""
import re
import sys

TS = re.compile(r"^\[\s*\d+\.\d+\]\s?")
SUBTEST = re.compile(r"^(\s*)# Subtest: (\S+)")
RESULT = re.compile(r"^(\s*)(ok|not ok) (\d+) (\S+)(.*)$")
PLAN = re.compile(r"^(\s*)1\.\.(\d+)")


def parse(lines):
    """Return {suite: {"cases": [(name, ok, extra)], "done": bool, "ok": bool, "plan": int}}."""
    suites = {}
    stack = []  # (indent, suite name)
    for raw in lines:
        line = TS.sub("", raw.rstrip("\n"))
        m = SUBTEST.match(line)
        if m:
            indent, name = len(m.group(1)), m.group(2)
            # A suite run again (module reloaded) is recorded as NAME#2, ...
            base, n = name, 1
            while name in suites:
                n += 1
                name = f"{base}#{n}"
            suites.setdefault(name, {"cases": [], "done": False, "ok": False, "plan": None, "indent": indent})
            stack.append((indent, name))
            continue
        m = PLAN.match(line)
        if m and stack:
            suites[stack[-1][1]]["plan"] = int(m.group(2))
            continue
        m = RESULT.match(line)
        if m and stack:
            indent, ok, name, extra = len(m.group(1)), m.group(2) == "ok", m.group(4), m.group(5)
            cur_indent, cur = stack[-1]
            if indent > cur_indent or (indent == cur_indent and name != cur.split("#")[0]):
                suites[cur]["cases"].append((name, ok, extra.strip()))
            else:
                suites[cur]["done"] = True
                suites[cur]["ok"] = ok
                stack.pop()
    return suites


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], errors="replace") as f:
        suites = parse(f)
    expected = sys.argv[2:]
    passed = failed = 0
    for name in expected:
        if name not in suites:
            print(f"kunit: not ok {name} (suite missing from the kernel log)")
            failed += 1
    for name, s in suites.items():
        if expected and name.split("#")[0] not in expected:
            continue
        for case, ok, extra in s["cases"]:
            skip = "# SKIP" in extra
            if ok:
                passed += 1
                print(f"kunit: ok {name}.{case}{' (skipped)' if skip else ''}")
            else:
                failed += 1
                print(f"kunit: not ok {name}.{case} {extra}".rstrip())
        if not s["done"]:
            failed += 1
            print(f"kunit: not ok {name} (suite crashed: no final result line)")
        elif s["plan"] is not None and s["plan"] != len(s["cases"]):
            failed += 1
            print(f"kunit: not ok {name} (plan {s['plan']} cases, saw {len(s['cases'])})")
        elif not s["ok"] and all(ok for _, ok, _ in s["cases"]):
            failed += 1
            print(f"kunit: not ok {name} (suite reported failure)")
    print(f"kunit: {passed} ok, {failed} not ok")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
