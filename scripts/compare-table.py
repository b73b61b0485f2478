#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Documentation/pyverbs-compare.rst from two pyverbs result files
(tests/vm/pyverbs_results.py output): rroce's and rdma_rxe's.

  compare-table.py ROCE_RESULTS RXE_RESULTS KERNEL DATE
"""
import sys


def load(path):
    res = {}
    for line in open(path):
        if line.startswith('#') or not line.strip():
            continue
        name, _, rest = line.rstrip('\n').partition(' ')
        res[name] = rest
    return res


def status(r):
    return r.split(' ', 1)[0] if r else 'absent'


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    a, b = load(sys.argv[1]), load(sys.argv[2])
    kver, date = sys.argv[3], sys.argv[4]
    names = sorted(set(a) | set(b))

    def count(res, st):
        return sum(1 for n in res if status(res[n]) == st)
    out = []
    out.append('.. SPDX-License-Identifier: GPL-2.0')
    out.append('')
    out.append('rdma-core\'s test suite on rroce and rdma_rxe')
    out.append('=' * len(out[-1]))
    out.append('')
    out.append(f'Written by ``make compare`` on {date}: Debian\'s python3-pyverbs (rdma-core 44)')
    out.append(f'run with ``run_tests.py --dev``, kernel {kver}, both drivers in the same VM boot,')
    out.append('each on a veth in its own namespace (``tests/vm/t85-pyverbs.sh``).')
    out.append('')
    out.append('.. list-table::')
    out.append('   :header-rows: 1')
    out.append('')
    out.append('   * - result')
    out.append('     - rroce')
    out.append('     - rdma_rxe')
    for st, label in (('ok', 'passed'), ('FAIL', 'failed'), ('ERROR', 'errors'), ('skip', 'skipped')):
        out.append(f'   * - {label}')
        out.append(f'     - {count(a, st)}')
        out.append(f'     - {count(b, st)}')
    out.append('')
    diff = [n for n in names if status(a.get(n)) != status(b.get(n))]
    out.append('Tests whose result differs')
    out.append('--------------------------')
    out.append('')
    if not diff:
        out.append('None.')
    else:
        out.append('.. list-table::')
        out.append('   :header-rows: 1')
        out.append('')
        out.append('   * - test')
        out.append('     - rroce')
        out.append('     - rdma_rxe')
        for n in diff:
            out.append(f'   * - ``{n}``')
            out.append(f'     - {a.get(n, "absent") or "-"}')
            out.append(f'     - {b.get(n, "absent") or "-"}')
    out.append('')
    skips = {}
    for n in names:
        if status(a.get(n)) == 'skip' and status(b.get(n)) == 'skip':
            reason = a[n].partition(' ')[2] or '(no reason given)'
            skips.setdefault(reason, []).append(n)
    out.append('Skipped on both')
    out.append('---------------')
    out.append('')
    out.append('The reason pyverbs gives, and how many tests it skips on both drivers')
    out.append('(most need hardware-specific providers: mlx5, efa, CUDA, ...).')
    out.append('')
    for reason, ns in sorted(skips.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out.append(f'- {len(ns)}: {reason}')
    print('\n'.join(out))


if __name__ == '__main__':
    main()
