#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""KUnit suites of rroce, read from the sources.

  kunit-suites.py --list      print every suite name (for scripts/ktap.py)
  kunit-suites.py --coverage  check that every `selftest` function of the
                              engine core (src/engine/, an inline
                              `pub mod selftest { .. }` or a `selftest.rs`
                              file) has a KUnit case in src/test/kunit.rs; exit 1
                              naming what is missing
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SUITE_MACRO = re.compile(r"selftest_suite!\(\s*(\w+)\s*,\s*([\w:]+)\s*,\s*\[([^\]]*)\]", re.S)
KUNIT_ATTR = re.compile(r"#\[kunit_tests\((\w+)\)\]")
SELFTEST_FN = re.compile(r"^    pub fn (\w+)\(\) -> Result<\(\), &'static str>", re.M)
SELFTEST_FILE_FN = re.compile(r"^pub fn (\w+)\(\) -> Result<\(\), &'static str>", re.M)


def suites():
    names = set()
    for f in (ROOT / "src").rglob("*.rs"):
        text = f.read_text()
        names.update(KUNIT_ATTR.findall(text))
        names.update(m.group(1) for m in SUITE_MACRO.finditer(text))
    return sorted(names)


def module_path(f):
    """`crate::` path of the module that source file `f` defines."""
    parts = list(f.relative_to(ROOT / "src").with_suffix("").parts)
    if parts[-1] == "mod":
        parts.pop()
    return "::".join(["crate"] + parts)


def selftests():
    """(module path, selftest functions) of every engine selftest module,
    whether written inline (`pub mod selftest { .. }`, functions indented
    once) or as its own `selftest.rs` file (functions at the top level)."""
    found = []
    for f in sorted((ROOT / "src/engine").rglob("*.rs")):
        text = f.read_text()
        path = module_path(f)
        if f.name == "selftest.rs":
            found.append((path, SELFTEST_FILE_FN.findall(text)))
            continue
        i = text.find("pub mod selftest {")
        if i >= 0:
            found.append((f"{path}::selftest", SELFTEST_FN.findall(text[i:])))
    return found


def coverage():
    kunit = (ROOT / "src/test/kunit.rs").read_text()
    wrapped = {}
    for m in SUITE_MACRO.finditer(kunit):
        path = m.group(2)
        wrapped[path] = {c.strip() for c in m.group(3).split(",") if c.strip()}
    missing = 0
    for path, fns in selftests():
        for fn in fns:
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
