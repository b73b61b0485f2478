#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Reduce a verbose unittest log (run_tests.py -v) to one line per test:
"NAME STATUS [REASON]", STATUS one of ok, skip, FAIL, ERROR, xfail; NAME is
module.Class.test. A summary line starts with "# "."""
import re
import sys


def name_of(test, where):
    """mod.Class.test from unittest's "test (tests.mod.Class[.test])"."""
    return where if where.endswith('.' + test) else f'{where}.{test}'


def main(path):
    text = open(path, errors='replace').read()
    results = {}
    # unittest -v writes "test_x (tests.mod.Class) ... ok" (a docstring's
    # first line may sit between the name and the dots); a test's own
    # output can split the line, so the status is matched on its own too.
    for m in re.finditer(r'^(test\w*) \((?:tests\.)?([\w.]+)\)[^\n]*?(?:\n[^\n]*?)?'
                         r' \.\.\. ([^\n]*)$', text, re.M):
        name = name_of(m.group(1), m.group(2))
        st = m.group(3).strip()
        if st == 'ok':
            results[name] = 'ok'
        elif st.startswith('skipped'):
            results[name] = 'skip ' + st[len('skipped'):].strip().strip("'\"")
        elif st.startswith('expected failure'):
            results[name] = 'xfail'
        elif st.startswith('FAIL'):
            results[name] = 'FAIL'
        elif st.startswith('ERROR'):
            results[name] = 'ERROR'
        else:
            results[name] = 'ERROR unparsed: ' + st[:80]
    # Failures and errors are also listed at the end ("FAIL: test (mod)"),
    # which catches a status line a test's output garbled.
    for m in re.finditer(r'^(FAIL|ERROR): (test\w*) \((?:tests\.)?([\w.]+)\)', text, re.M):
        results[name_of(m.group(2), m.group(3))] = m.group(1)
    counts = {}
    for name in sorted(results):
        st = results[name]
        counts[st.split()[0]] = counts.get(st.split()[0], 0) + 1
        print(name, st)
    print('# ' + ', '.join(f'{n} {k}' for k, n in sorted(counts.items())))


if __name__ == '__main__':
    main(sys.argv[1])
