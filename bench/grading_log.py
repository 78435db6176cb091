"""
How many gradings a run made, and which graded the same upload in the same mode more than once (issue 43):

    HW1_GRADING_LOG=/tmp/gradings.jsonl python -m pytest tests/e2e/test_grading.py ...
    python bench/grading_log.py /tmp/gradings.jsonl [--all]

The log is autograder/judge/grading_log.py's (one line per grading, in every process, subprocesses included).
"The same mode" is the same upload bytes, profile, grading.yaml, skipped tests and sandbox defences; a repeat
may be on purpose (a determinism test, a batch's resume, a timing or neighbour test), which is why each is
listed with the tests that made it rather than counted as waste.
"""

import argparse
import collections
import json
import sys


def key(line):
    return (line['upload'], line['profile'], line['grading_yaml'], tuple(line['skip']), line['disable'])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('log')
    ap.add_argument('--all', action='store_true', help='list every grading by test, not only the repeats')
    args = ap.parse_args(argv)
    with open(args.log, encoding='utf-8') as f:
        lines = [json.loads(x) for x in f if x.strip()]
    groups = collections.defaultdict(list)
    for line in lines:
        groups[key(line)].append(line)
    repeats = {k: v for k, v in groups.items() if len(v) > 1}
    print('%d gradings, %.0f s of grading (each its own execution_time; two workers overlap them); %d distinct '
          '(upload, mode); %d graded more than once, %d gradings beyond the first each, %.0f s'
          % (len(lines), sum(x['seconds'] for x in lines), len(groups), len(repeats),
             sum(len(v) - 1 for v in repeats.values()),
             sum(sum(x['seconds'] for x in v[1:]) for v in repeats.values())))
    for k, v in sorted(repeats.items(), key=lambda kv: -len(kv[1])):
        print('\n%s x%d  (upload %s, profile %s, skip %s, disable %r)' % ('repeat', len(v), (k[0] or '?')[:12], k[1],
                                                                      list(k[3]) or '-', k[4]))
        for x in v:
            where = ' [batch]' if x['batch'] else ' [run_autograder]' if x['autograder_root'] else ''
            print('    %6.1f s  %s%s' % (x['seconds'], x['test'] or '(outside pytest)', where))
    if args.all:
        by_test = collections.Counter(x['test'].split('::')[0] for x in lines)
        print('\ngradings by file:')
        for name, n in by_test.most_common():
            print('  %4d  %s' % (n, name or '(outside pytest)'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
