"""
How the suite's groups filled the two xdist workers, from a timeline file the suite writes when
HW1_SUITE_TIMELINE=<file> is set (tests/conftest.py): per worker its busy and idle seconds, and the
groups in the order they ran with their length. Usage: python bench/suite_timeline.py TIMELINE
"""

import collections
import sys


def read(path):
    """[(worker, group, start, end, test)] in start order."""
    rows = []
    with open(path, encoding='utf-8') as f:
        for line in f:
            worker, group, start, end, test = line.rstrip('\n').split('\t', 4)
            rows.append((worker, group, float(start), float(end), test))
    return sorted(rows, key=lambda r: r[2])


def main(path):
    rows = read(path)
    first, last = rows[0][2], max(r[3] for r in rows)
    print('suite: %.0f s from the first test to the last' % (last - first))
    by_worker = collections.defaultdict(list)
    for r in rows:
        by_worker[r[0]].append(r)
    for worker, mine in sorted(by_worker.items()):
        busy = sum(r[3] - r[2] for r in mine)
        print('\n%s: %.0f s busy, %.0f s idle' % (worker, busy, (last - first) - busy))
        groups = []   # (group, start, end, tests) in the order the worker ran them
        for r in mine:
            if groups and groups[-1][0] == r[1]:
                groups[-1][2], groups[-1][3] = r[3], groups[-1][3] + 1
            else:
                groups.append([r[1], r[2], r[3], 1])
        for group, start, end, n in groups:
            print('  %6.0f-%6.0f s  %5.0f s  %3d tests  %s' % (start - first, end - first, end - start, n, group))


if __name__ == '__main__':
    main(sys.argv[1])
