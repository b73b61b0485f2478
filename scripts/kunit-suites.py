#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""KUnit suites of rroce, read from the sources.

  kunit-suites.py --list      print every suite name (for scripts/ktap.py)
  kunit-suites.py --coverage  check that every `selftest` function of the
                              engine core (src/engine/*.rs) has a KUnit case
                              in src/test/kunit.rs; exit 1 naming what is missing
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SUITE_MACRO = re.compile(r"selftest_suite!\(\s*(\w+)\s*,\s*([\w:]+)\s*,\s*\[([^\]]*)\]", re.S)
KUNIT_ATTR = re.compile(r"#\[kunit_tests\((\w+)\)\]")
SELFTEST_FN = re.compile(r"^    pub fn (\w+)\(\) -> Result<\(\), &'static str>", re.M)


def suites():
    names = set()
    for f in (ROOT / "src").rglob("*.rs"):
        text = f.read_text()
        names.update(KUNIT_ATTR.findall(text))
        names.update(m.group(1) for m in SUITE_MACRO.finditer(text))
    return sorted(names)


def coverage():
    kunit = (ROOT / "src/test/kunit.rs").read_text()
    wrapped = {}
    for m in SUITE_MACRO.finditer(kunit):
        path = m.group(2)
        wrapped[path] = {c.strip() for c in m.group(3).split(",") if c.strip()}
    missing = 0
    for f in sorted((ROOT / "src/engine").glob("*.rs")):
        text = f.read_text()
        i = text.find("pub mod selftest")
        if i < 0:
            continue
        path = f"crate::engine::{f.stem}::selftest"
        for fn in SELFTEST_FN.findall(text[i:]):
            if fn not in wrapped.get(path, set()):
                print(f"kunit-coverage: {path}::{fn} has no KUnit case in src/test/kunit.rs")
                missing += 1
    if not missing:
        print("kunit-coverage: every engine selftest runs under KUnit")
    return 1 if missing else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--list"]:
        print("\n".join(suites()))
        sys.exit(0)
    if sys.argv[1:] == ["--coverage"]:
        sys.exit(coverage())
    print(__doc__, file=sys.stderr)
    sys.exit(2)
