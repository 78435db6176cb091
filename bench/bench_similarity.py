"""
The similarity pass of the class report at the size of a class (run by hand, never by pytest):

    python bench/bench_similarity.py               # a class of 1,000
    python bench/bench_similarity.py --size 300

Times, in this process (CPU seconds and wall), the two halves of autograder/staff/regrade/
similarity.py without grading anything:

- text (text_match.pairs: token fingerprints, file and unit leads, margins) over the model.py files of
  class_export.realistic_submissions(N), the class `bench_batch.py --class realistic` grades (each correct
  style sent by several students: identical files, one fingerprint per distinct file), and over the same files
  made all distinct (a line with the student's own number added to each: no two alike once normalised, every
  file fingerprinted and the near-identical ones compared pair by pair: the worst case);
- behaviour (behaviour_match.pairs) over prints shaped as a batch keeps them: the share of the
  class that is a mutant, each with 5 failing tests of 4 arrays of 48 sampled values, on one of 4
  input sets, mutants of one bug agreeing where their sets (or the shared 10.1) allow, and each wrong
  on two parts of the class's shared inputs (one group for the whole class: every mutant of a bug agrees).
"""

import argparse
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, 'tests', 'helpers'))
sys.path.insert(0, REPO)
import class_export  # noqa: E402
from autograder.staff.regrade import behaviour_match, text_match  # noqa: E402
from machine import cpu_model  # noqa: E402  (bench/machine.py)

TESTS = ('model', 'generate', 'loss-curve', 'gradients', 'load-pretrained')


def timed(label, fn):
    wall, cpu = time.time(), time.process_time()
    out = fn()
    print('  %-58s %7.1f s wall, %7.1f CPU-s' % (label, time.time() - wall, time.process_time() - cpu), flush=True)
    return out


def sources(n, distinct):
    out = {}
    for i, (text, _, what) in enumerate(class_export.realistic_submissions(n)):
        if text is not None:
            out['submission_%d' % i] = text + ('\nSTUDENT = %d\n' % i if distinct else '')
    return out


def prints(n):
    """{submission: prints} for the mutants of a realistic class of n, shaped as behaviour_prints keeps them."""
    out = {}
    mutants = [w for _, _, w in class_export.realistic_submissions(n)]
    for i, what in enumerate(mutants):
        if not what.startswith('buggy/'):
            continue
        bug, input_set = sum(map(ord, what)), (i * 7919) % 4
        tests = {}
        for t, tid in enumerate(TESTS):
            scope = 0 if tid == 'loss-curve' else input_set
            tests[tid] = {'case%d/out' % k: {'shape': [64, 65], 'wrong': 1000 + bug % 97,
                                             'at': list(range(0, 4096, 86)),
                                             'got': [float((bug * 31 + scope * 7 + k + j) % 1000) / 7.0
                                                     for j in range(48)],
                                             'reference': [0.0] * 48} for k in range(4)}
        # the class's shared inputs (shared_inputs.py): every mutant wrong on two parts, one print each, the same
        # values for one bug whatever its set: the whole class is one group there (the worst case)
        shared = {part: {part: {'shape': shape, 'wrong': 200 + bug % 13, 'at': list(range(0, 480, 10)),
                                'got': [float((bug * 17 + j) % 1000) / 7.0 for j in range(48)],
                                'reference': [0.0] * 48}}
                  for part, shape in (('rope', [1, 2, 12, 8]), ('gqa', [1, 12, 48]))}
        out['submission_%d' % i] = {'input_set': input_set, 'shared': ['loss-curve', 'memory'], 'tests': tests,
                                    'shared_inputs': shared}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--size', type=int, default=1000)
    args = ap.parse_args()
    print('machine: nproc %d, %s; python %s; load average %.1f; class of %d' % (
        os.cpu_count() or 0, cpu_model(), sys.version.split()[0], os.getloadavg()[0], args.size), flush=True)
    for distinct in (False, True):
        src = sources(args.size, distinct)
        found = timed('text, %d files%s' % (len(src), ' made distinct' if distinct else ' as the bench class'),
                      lambda: text_match.pairs(src))
        print('    %d pairs flagged (%d by a class or function)' % (len(found), sum(p.kind == 'unit' for p in found)))
    p = prints(args.size)
    found = timed('behaviour, %d mutants\' prints' % len(p), lambda: behaviour_match.pairs(p))
    print('    %d pairs agree (%d inside common clusters)' % (len(found), sum(x.common for x in found)))


if __name__ == '__main__':
    main()
