"""
The grader itself on a GPU, in one prepared call (issue 45): the sandbox pool made where it is missing, the
project's Python packages from a carried wheelhouse (no network there), fixtures made on CUDA and compared
with the committed CPU fixtures within each test's tolerance, and gradings under the gpu profile in both
sandbox modes. Writes one JSON report and a Markdown table into --out; exits 1 when a check fails.

    python bench/gpu_grading.py --make-wheelhouse .whl        # here, with network: what the GPU machine lacks
    python bench/gpu_grading.py --out DIR --wheelhouse .whl   # on the lent GPU machine (bench/README.md: the call)
    python bench/gpu_grading.py --out DIR --device cpu --quick --setup dry-run   # the CPU dry run (CI)

Phases, in order of what a short lease most needs, each a subprocess with a timeout cut to what is left of
--budget (a phase that no longer fits is recorded as skipped; the report is rewritten after every phase, so
a call stopped at its limit still leaves it):
  setup        ./setup.sh as root with HW1_KEEP_TORCH=1 HW1_NO_EXTRAS=1 and pip reading only the wheelhouse
               (PIP_NO_INDEX, PIP_FIND_LINKS): the pool users, the interpreter copy, the folder scan
  check        `sandbox check` (the defences in force, proven by the self-test) in both modes, with
               grading.yaml's settings and again with the --set ones
  compare      the reference through the probes at the cpu profile's sizes on --device, input set 0 (the
               shared probes included), against the committed autograder/fixtures/cpu/ within each test's
               tolerance (integers exactly; 10.1 on the held-out loss), as `regenerate` measures its changes
  regenerate   `regenerate --device cuda --root WORK --reference-only`: the gpu profile's fixtures, into a
               temporary root, to grade with (--device cpu grades the cpu profile with the committed ones)
  grade        the reference, the template and a few submissions of tests/submissions in each mode, one
               Sandbox per mode (a batch worker's way); the memory submissions run 9.1 alone
  full         with what is left of the budget (cuda only): the whole regenerate, known bugs included, into
               another temporary root; when it ends, its gpu/ folder is copied to --out/fixtures/gpu
               (the public test key's: what docs/STAFF.md says to commit)

--set sandbox.KEY=VALUE changes grading.yaml's sandbox section in every phase after `check`'s first pass
(each is listed in the report as a deviation): e.g. PyPI's CUDA torch maps ~3.1 GB of address space at
import, above sandbox.address_space_mb (docs/BENCHMARKS.md, "Python 3.10").
"""

import argparse
import dataclasses
import json
import os
import platform
import pwd
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

REPORT, TABLE = 'gpu_grading.json', 'gpu_grading.md'
MODES = {'strongest': None, 'gradescope': 'namespaces,cgroups'}   # HW1_SANDBOX_DISABLE of each mode
SUBMISSIONS = os.path.join(REPO, 'tests', 'submissions')
# (name, model.py, what it must show, which tests run): the memory ones run 9.1 alone (its evidence is its own)
GRADED = (
    ('reference', os.path.join(REPO, 'reference', 'mingpt', 'model.py'), 'full', 'all'),
    ('template', os.path.join(REPO, 'student_template', 'hw1', 'mingpt', 'model.py'), 'zero', 'all'),
    # wrong only where a real allocator answers as a GPU's does: a peak never reset (the warm-up's larger one),
    # the raw memory_allocated() or max_memory_allocated() (the model's weights and inputs in it)
    ('memory_peak_no_reset', os.path.join(SUBMISSIONS, 'buggy', 'memory_peak_no_reset', 'model.py'),
     'fails 9.1', 'memory'),
    ('memory_raw_allocated', os.path.join(SUBMISSIONS, 'buggy', 'memory_raw_allocated', 'model.py'),
     'fails 9.1', 'memory'),
    ('memory_raw_max', os.path.join(SUBMISSIONS, 'buggy', 'memory_raw_max', 'model.py'), 'fails 9.1', 'memory'),
    ('memory_constant', os.path.join(SUBMISSIONS, 'buggy', 'memory_constant', 'model.py'), 'fails 9.1', 'memory'),
    # a correct course style with every CUDA idiom (a device flag, synchronize, memory_allocated(device))
    ('course_region_device_flag_sync',
     os.path.join(SUBMISSIONS, 'correct', 'course_region_device_flag_sync', 'model.py'), 'passes 9.1', 'memory'),
)
# --quick (the CPU dry run): the two training tests and 11.2's 16k-row probe are the grading's longest
QUICK_SKIP = ('loss-curve', 'gradients', 'load-pretrained', 'sliding-window-memory')
QUICK_PROBES = ('rope', 'rope-cache', 'mha-rope', 'gqa', 'gqa-rope', 'model', 'generate', 'memory')


def log(msg):
    print('gpu_grading: %s' % msg, flush=True)


# ------------------------------------------------------------------ phases run in a child process

def apply_settings(pairs):
    """grading.yaml's sandbox section changed as --set asks, for every config.load of this process."""
    from autograder.judge import config
    if not pairs:
        return
    load = config.load

    def changed(*args, **kwargs):
        grading = load(*args, **kwargs)
        for key, value in pairs:
            grading.sandbox[key] = value
        return grading
    config.load = changed


def phase_check(args):
    """{isolation of `sandbox check`} or {refused: why}."""
    from autograder.judge import config, sandbox_commands
    from autograder.sandbox import cli
    from autograder.sandbox.defences import SandboxRefused
    try:
        isolation = sandbox_commands.check(config.load())
    except SandboxRefused as e:
        return {'refused': str(e)}
    lines, safe = cli.describe(isolation)
    return {'isolation': isolation, 'safe': safe, 'verdict': lines[-1]}


def compare_arrays(grading, new, old, shared_seed):
    """{test id: {worst, key, arrays, ok}}: each array's largest |new - old| in units of its test's tolerance."""
    import numpy as np
    from autograder.judge import registry
    from autograder.judge.areas.training import cross_entropy, heldout_targets
    from autograder.staff.fixtures.fixture_changes import NO_TOLERANCE_FLOOR
    out = {}
    for key in sorted(new):
        test_id = key.split('/')[0].split('~')[0]
        a, b = old.get(key), new[key]
        row = out.setdefault(test_id, {'worst': 0.0, 'key': '', 'arrays': 0, 'ok': True, 'problems': []})
        row['arrays'] += 1
        if a is None or a.shape != b.shape:
            row['ok'] = False
            row['problems'].append('%s: %s' % (key, 'not in the committed fixtures' if a is None else
                                               'shape %s, committed %s' % (b.shape, a.shape)))
            continue
        if test_id in registry.SHAPES_ONLY:
            continue   # kernel readings: the fixtures keep their shape only
        if a.dtype.kind not in 'fc':
            r = 0.0 if np.array_equal(a, b) else float('inf')
        elif key.endswith('/heldout_logits'):
            target = heldout_targets('cpu', grading, shared_seed)
            r = abs(cross_entropy(b, target) - cross_entropy(a, target)) / grading.test('loss-curve').tolerance.atol
        else:
            tol = grading.test(test_id).tolerance if test_id in {t.id for t in grading.tests} else None
            d = np.nan_to_num(np.abs(b.astype(np.float64) - a.astype(np.float64)), nan=0.0)
            if not np.array_equal(np.isnan(a), np.isnan(b)):
                r = float('inf')
            elif tol is None:
                r = float(d.max()) / NO_TOLERANCE_FLOOR if d.size else 0.0
            else:
                allow = np.maximum(tol.atol + tol.rtol * np.abs(a.astype(np.float64)), 1e-30)
                r = float(np.max(d / allow)) if d.size else 0.0
        if r > row['worst'] or not row['key']:
            row['worst'], row['key'] = r, key
        row['ok'] = row['ok'] and r <= 1.0
    return out


def phase_compare(args):
    """The reference at the cpu profile's sizes on args.device (input set 0) against the committed cpu fixtures."""
    import numpy as np
    from autograder import FIXTURES_DIR, REFERENCE_DIR
    from autograder.judge import config, fixtures, inputs, registry
    from autograder.judge.areas import memory
    from autograder.sandbox import Sandbox
    from autograder.staff.fixtures import regenerate
    grading = config.load()
    committed = fixtures.load(grading, 'cpu', base=FIXTURES_DIR)   # stale ones are refused: nothing to compare
    profile = dataclasses.replace(grading.profiles['cpu'], device=args.device)
    key = fixtures.PUBLIC_TEST_KEY
    seeds = (inputs.set_seed(profile, key, 0), inputs.shared_seed(profile, key))
    lc_seeds = [profile.loss_curve.student_seed]   # the one run 10.1 judges (its held-out logits)
    started = time.time()
    with Sandbox(grading.sandbox) as sandbox:
        if args.quick:   # the probes that need no training, one process each
            result = regenerate.run_probes(sandbox, os.path.join(REFERENCE_DIR, 'mingpt', 'model.py'), profile,
                                           list(QUICK_PROBES), inputs.build(profile, *seeds))
        else:
            result = regenerate.reference_set(sandbox, os.path.join(REFERENCE_DIR, 'mingpt', 'model.py'), profile,
                                              seeds, 0, lc_seeds)
    bad = {p: (r.status, r.message) for p, r in result.probes.items() if r.status != 'ok'}
    new = regenerate.flatten(result)
    old = committed.view(0).expected
    new = memory.keep_window_rows(new, old, profile)
    new = {k: v for k, v in new.items() if k in old or k.split('/')[0].split('~')[0] not in registry.SHAPES_ONLY}
    tests = compare_arrays(grading, new, old, committed.shared_seed)
    return {'seconds': round(time.time() - started, 1), 'probes': sorted(result.probes), 'failed_probes': bad,
            'arrays': len(new), 'tests': tests, 'ok': not bad and all(t['ok'] for t in tests.values()),
            'sandboxed_as': result.sandboxed_as, 'torch_note': 'numpy %s' % np.__version__}


def phase_regenerate(args):
    from autograder.staff.fixtures import regenerate
    argv = ['regenerate', '--device', args.device, '--root', args.fixtures, '--skip-reference-tests']
    if args.reference_only:
        argv.append('--reference-only')
    started = time.time()
    rc = regenerate.main(argv)
    return {'rc': rc, 'seconds': round(time.time() - started, 1), 'argv': argv}


def phase_grade(args):
    """Each of GRADED under args.profile, one Sandbox for all (HW1_SANDBOX_DISABLE set by the parent)."""
    from autograder.judge import config, fixtures, grade, registry
    from autograder.sandbox import Sandbox
    if args.fixtures:   # the fixtures regenerate just made (the committed root has no gpu/)
        fixtures.root = lambda: args.fixtures
    grading = config.load()
    every = [t.id for t in grading.tests]
    rows = []
    os.makedirs(args.results, exist_ok=True)
    with Sandbox(grading.sandbox) as sandbox:
        for name, path, expect, which in GRADED:
            if which == 'memory':
                skip = tuple(t for t in every if t not in ('submission', 'memory') and t in registry.BY_ID)
            else:
                skip = QUICK_SKIP if args.quick else ()
            skip = tuple(t for t in skip if t in every)
            started = time.time()
            out = grade.grade_results(path, args.profile, os.path.join(args.results, name + '.json'),
                                      skip=skip, sandbox=sandbox).to_json()
            rows.append(judge_row(name, expect, skip, out, time.time() - started))
    return {'rows': rows}


def judge_row(name, expect, skip, out, seconds):
    """What one grading showed against what it must show."""
    tests = {t.get('number'): t for t in out['tests']}
    split = (out.get('extra_data') or {}).get('points') or {}
    memory = tests.get('9.1') or {}
    failed = sorted(n for n, t in tests.items() if t['status'] != 'passed' or t['score'] < t['max_score'])
    if expect == 'full':
        ok = not failed and split.get('required') == split.get('required_max') and \
            split.get('extra_credit') == split.get('extra_credit_max')
    elif expect == 'zero':
        ok = sum(t['score'] for t in out['tests']) == 0
    elif expect == 'fails 9.1':
        ok = bool(memory) and memory['score'] < memory['max_score']
    else:
        ok = bool(memory) and memory['status'] == 'passed' and memory['score'] == memory['max_score']
    isolation = (out.get('extra_data') or {}).get('isolation') or {}
    error = (out.get('extra_data') or {}).get('grader_error')
    return {'submission': name, 'expect': expect, 'ok': bool(ok) and not error, 'seconds': round(seconds, 1),
            'required': split.get('required'), 'required_max': split.get('required_max'),
            'extra_credit': split.get('extra_credit'), 'extra_credit_max': split.get('extra_credit_max'),
            'total': sum(t['score'] for t in out['tests']), 'failed_tests': failed, 'skipped_tests': list(skip),
            'memory_9_1': (memory.get('output') or '').splitlines()[:3], 'lacks': isolation.get('lacks'),
            'grader_error': error}


PHASES = {'check': phase_check, 'compare': phase_compare, 'regenerate': phase_regenerate, 'grade': phase_grade}


def run_phase(args):
    apply_settings(args.set)
    try:
        out = PHASES[args.phase](args)
    except BaseException as e:   # the parent reports it; the phase's own output holds the traceback
        import traceback
        traceback.print_exc()
        out = {'error': '%s: %s' % (type(e).__name__, e)}
    with open(args.answer, 'w') as f:
        json.dump(out, f, indent=1, default=str)
    return 0


# ------------------------------------------------------------------ the call (parent)

class Call:
    def __init__(self, args):
        self.args, self.started = args, time.time()
        self.work = tempfile.mkdtemp(prefix='hw1-gpu-grading-')   # 0700: fixtures in it are closed to the pool
        self.report = {'command': ' '.join([os.path.basename(sys.executable)] + sys.argv), 'device': args.device,
                       'quick': args.quick, 'budget_s': args.budget, 'deviations': dict(args.set),
                       'env': environment(args.device), 'phases': {}, 'checks': []}
        os.makedirs(args.out, exist_ok=True)

    def left(self):
        return self.args.budget - (time.time() - self.started)

    def check(self, name, ok, **facts):
        self.report['checks'].append(dict(check=name, ok=bool(ok), **facts))
        log('%-4s %s %s' % ('ok' if ok else 'FAIL', name, json.dumps(facts, default=str)[:300]))

    def child(self, label, phase, need, limit, extra=(), settings=True, env=None):
        """One phase in a subprocess (at most `limit` s, skipped when under `need` s are left): its answer."""
        if self.left() < need:
            self.report['phases'][label] = {'skipped': 'under %d s of the budget left' % need}
            self.write()
            return None
        answer = os.path.join(self.work, label.replace(' ', '-') + '.answer.json')
        cmd = [sys.executable, os.path.abspath(__file__), '--phase', phase, '--answer', answer,
               '--device', self.args.device, '--out', self.args.out] + list(extra)
        if self.args.quick:
            cmd.append('--quick')
        if settings:
            cmd += [a for k, v in self.args.set for a in ('--set', 'sandbox.%s=%s' % (k, v))]
        out = self.process(label, cmd, min(limit, self.left()), env)
        if os.path.exists(answer):
            with open(answer) as f:
                out['answer'] = json.load(f)
        self.report['phases'][label] = out
        self.write()
        return out.get('answer')

    def process(self, label, cmd, limit, env=None):
        started = time.time()
        log('%s: %s (at most %d s)' % (label, ' '.join(os.path.relpath(c, REPO) if c.startswith(REPO) else c
                                                       for c in cmd[1:]), limit))
        full_env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''),
                        PYTHONUNBUFFERED='1')
        full_env.pop('HW1_SANDBOX_DISABLE', None)
        full_env.update(env or {})
        logfile = os.path.join(self.args.out, 'logs', label.replace(' ', '-') + '.log')   # plain names travel back
        os.makedirs(os.path.dirname(logfile), exist_ok=True)
        with open(logfile, 'w') as f:
            try:
                rc = subprocess.run(cmd, cwd=REPO, env=full_env, stdout=f, stderr=subprocess.STDOUT,
                                    timeout=max(1, limit)).returncode
            except subprocess.TimeoutExpired:
                rc = 'timeout after %d s' % limit
        with open(logfile, errors='replace') as f:
            tail = f.read()[-1500:]
        return {'rc': rc, 'seconds': round(time.time() - started, 1), 'log_tail': tail.splitlines()[-12:]}

    def write(self):
        self.report['seconds'] = round(time.time() - self.started, 1)
        self.report['passed'] = sum(c['ok'] for c in self.report['checks'])
        self.report['failed'] = [c['check'] for c in self.report['checks'] if not c['ok']]
        with open(os.path.join(self.args.out, REPORT), 'w') as f:
            json.dump(self.report, f, indent=1, default=str)
        with open(os.path.join(self.args.out, TABLE), 'w') as f:
            f.write(markdown(self.report))

    # the phases, in order
    def setup(self):
        how = self.args.setup
        if how == 'skip':
            self.report['phases']['setup'] = {'skipped': '--setup skip'}
        else:
            env = {'HW1_KEEP_TORCH': '1', 'HW1_NO_EXTRAS': '1', 'HW1_SKIP_DATA': '1', 'PYTHON': sys.executable,
                   'PIP_NO_INDEX': '1', 'PIP_DISABLE_PIP_VERSION_CHECK': '1'}
            if self.args.wheelhouse:
                env['PIP_FIND_LINKS'] = os.path.abspath(self.args.wheelhouse)
            cmd = ['bash', os.path.join(REPO, 'setup.sh')] + (['--dry-run'] if how == 'dry-run' else [])
            out = self.process('setup', cmd, min(180, self.left()), env)
            self.report['phases']['setup'] = out
            if how == 'dry-run':
                with open(os.path.join(self.args.out, 'logs', 'setup.log')) as f:
                    said = f.read()
                self.check('setup.sh --dry-run keeps torch and installs from the wheelhouse only', out['rc'] == 0
                           and 'pip install -q torch' not in said and 'requirements-staff' not in said, rc=out['rc'])
        from autograder import DATA_FILE
        from autograder.judge import config
        from autograder.sandbox import users
        # git-ignored, so the device tool brings it only when `carry` names it (10.1 trains on it)
        self.check('data/input.txt present', os.path.isfile(DATA_FILE))
        sandbox = config.load().sandbox
        pool, note = users.sandbox_pool(sandbox['user'], sandbox['pool_size'])
        self.report['pool'] = {'users': [pwd.getpwuid(uid).pw_name for uid, _ in pool or []], 'note': note}
        self.check('sandbox pool users present', bool(pool) or os.geteuid() != 0, users=len(pool or []), note=note)
        self.write()

    def sandbox_checks(self):
        passes = [('committed', False)] + ([('with --set', True)] if self.args.set else [])
        self.report['defences'] = {}
        for label, settings in passes:
            for mode, disable in MODES.items():
                env = {'HW1_SANDBOX_DISABLE': disable} if disable else {}
                got = self.child('check %s %s' % (mode, label), 'check', 20, 120, settings=settings, env=env) or {}
                self.report['defences']['%s, %s' % (mode, label)] = defences_of(got)
                self.check('sandbox check (%s mode, %s settings) would run student code' % (mode, label),
                           'isolation' in got and got.get('safe'), verdict=got.get('verdict') or got.get('refused')
                           or got.get('error'))

    def compare(self):
        got = self.child('compare', 'compare', 30, 150) or {}
        tests = got.get('tests') or {}
        self.report['compare'] = got
        self.check('reference on %s at the cpu sizes = committed cpu fixtures within tolerance (set 0)'
                   % self.args.device, got.get('ok'), arrays=got.get('arrays'), failed_probes=got.get('failed_probes'),
                   worst={k: '%.3g' % v['worst'] for k, v in tests.items()}, error=got.get('error'))

    def regenerate(self):
        if self.args.device == 'cpu':
            return None   # the cpu profile grades with the committed fixtures
        root = os.path.join(self.work, 'fixtures')
        got = self.child('regenerate', 'regenerate', 60, 240, ['--fixtures', root, '--reference-only']) or {}
        ok = got.get('rc') == 0 and os.path.isfile(os.path.join(root, 'gpu', 'manifest.json'))
        self.check('regenerate --device cuda --reference-only (gpu profile) into a temporary root', ok,
                   rc=got.get('rc'), seconds=got.get('seconds'), error=got.get('error'))
        return root if ok else None

    def grade(self, root):
        profile = 'cpu' if self.args.device == 'cpu' else 'gpu'
        if profile == 'gpu' and root is None:
            self.report['phases']['grade'] = {'skipped': 'no gpu fixtures to grade with'}
            return
        self.report['gradings'] = {}
        for mode, disable in MODES.items():
            env = {'HW1_SANDBOX_DISABLE': disable} if disable else {}
            extra = ['--profile', profile, '--results', os.path.join(self.args.out, 'results', mode)]
            if root:
                extra += ['--fixtures', root]
            got = self.child('grade %s' % mode, 'grade', 40, 150, extra, env=env) or {}
            rows = got.get('rows') or []
            self.report['gradings'][mode] = rows
            if not rows:
                self.check('gradings in %s mode' % mode, False, error=got.get('error'))
            for row in rows:
                self.check('%s under --profile %s, %s mode: %s' % (row['submission'], profile, mode, row['expect']),
                           row['ok'], total=row['total'], failed=row['failed_tests'], seconds=row['seconds'],
                           lacks=row['lacks'], grader_error=row['grader_error'])

    def full_regenerate(self):
        if self.args.device == 'cpu' or self.args.no_full:
            return
        root = os.path.join(self.work, 'fixtures-full')
        got = self.child('full regenerate', 'regenerate', 120, 10 ** 6, ['--fixtures', root])
        if got is None:
            return
        done = got.get('rc') == 0 and os.path.isfile(os.path.join(root, 'gpu', 'manifest.json'))
        if done:
            shutil.copytree(os.path.join(root, 'gpu'), os.path.join(self.args.out, 'fixtures', 'gpu'))
        self.report['full_regenerate'] = {'finished': done, 'rc': got.get('rc'), 'seconds': got.get('seconds')}
        self.write()

    def run(self):
        self.setup()
        self.sandbox_checks()
        self.compare()
        self.grade(self.regenerate())
        self.full_regenerate()
        self.check('the call took under %d s' % self.args.budget, time.time() - self.started < self.args.budget,
                   seconds=round(time.time() - self.started, 1))
        self.write()
        shutil.rmtree(self.work, ignore_errors=True)
        log('%d passed, %d failed; %s' % (self.report['passed'], len(self.report['failed']),
                                          os.path.join(self.args.out, REPORT)))
        return 1 if self.report['failed'] else 0


def defences_of(got):
    """What `sandbox check` says of each defence: in force, or why not."""
    iso = got.get('isolation')
    if not iso:
        return {'refused': got.get('refused') or got.get('error')}
    keys = ('user', 'seccomp', 'namespaces', 'cgroups', 'network', 'proc', 'filesystem', 'processes', 'cpu', 'lacks',
            'selftest', 'python')
    return {k: iso[k] for k in keys if k in iso}


def environment(device):
    """The machine, the driver, torch: asked of a subprocess (the grader never imports torch)."""
    env = {'python': sys.version.split()[0], 'executable': sys.executable, 'machine': platform.platform(),
           'nproc': os.cpu_count(), 'euid': os.geteuid()}
    probe = ('import json, torch; c = torch.cuda.is_available(); print(json.dumps({"torch": torch.__version__, '
             '"cuda": torch.version.cuda, "available": c, "gpu": torch.cuda.get_device_name() if c else None}))')
    try:
        proc = subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True, timeout=120)
        env.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    except (subprocess.SubprocessError, ValueError, IndexError) as e:
        env['torch_error'] = repr(e)
    if device != 'cpu' and shutil.which('nvidia-smi'):
        proc = subprocess.run(['nvidia-smi', '--query-gpu=name,driver_version,memory.total,persistence_mode',
                               '--format=csv,noheader'], capture_output=True, text=True)
        env['nvidia_smi'] = proc.stdout.strip()
    try:
        env['commit'] = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=REPO, capture_output=True,
                                       text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        env['commit'] = None
    return env


def markdown(report):
    env = report['env']
    lines = ['# The grader on %s' % (env.get('gpu') or report['device']), '',
             '- Machine: %s, %s CPUs; Python %s; torch %s (CUDA %s); %s' % (
                 env.get('machine'), env.get('nproc'), env.get('python'), env.get('torch'), env.get('cuda'),
                 env.get('nvidia_smi') or 'no nvidia-smi'),
             '- Commit %s; %s s of a %s-s budget; deviations from grading.yaml: %s' % (
                 env.get('commit'), report.get('seconds'), report['budget_s'],
                 ', '.join('sandbox.%s=%s' % kv for kv in report['deviations'].items()) or 'none'), '']
    if report.get('defences'):
        lines += ['| sandbox check | defences |', '| --- | --- |']
        for label, d in report['defences'].items():
            if 'refused' in d:
                lines.append('| %s | refused: %s |' % (label, str(d['refused'])[:300].replace('|', '/')))
            else:
                on = [k for k in ('user', 'seccomp', 'namespaces', 'cgroups') if d.get(k) is True]   # else: why not
                lines.append('| %s | in force: %s; lacks: %s |' % (label, ', '.join(on) or 'none',
                                                                  ', '.join(d.get('lacks') or []) or 'nothing'))
        lines.append('')
    lines += ['| check | result | facts |', '| --- | --- | --- |']
    for c in report['checks']:
        facts = ', '.join('%s=%s' % (k, v) for k, v in c.items()
                          if k not in ('check', 'ok') and v not in (None, [], {}))
        lines.append('| %s | %s | %s |' % (c['check'], 'ok' if c['ok'] else 'FAIL', facts[:400].replace('|', '/')))
    skipped = {k: v['skipped'] for k, v in report['phases'].items() if 'skipped' in v}
    lines += ['', '%d of %d checks passed.%s' % (report.get('passed', 0), len(report['checks']),
                                                 (' Skipped: %s.' % skipped) if skipped else ''), '']
    return '\n'.join(lines)


def make_wheelhouse(folder, python_version):
    """requirements.txt but torch, as wheels for the GPU machine's Python (pip resolves their own needs)."""
    os.makedirs(folder, exist_ok=True)
    cmd = [sys.executable, '-m', 'pip', 'download', '--only-binary=:all:', '--python-version', python_version,
           '--implementation', 'cp', '--dest', folder, '-r', os.path.join(REPO, 'requirements.txt')]
    cmd += [a for p in ('manylinux_2_28_x86_64', 'manylinux_2_17_x86_64', 'manylinux2014_x86_64')
            for a in ('--platform', p)]
    subprocess.run(cmd, check=True)
    names = sorted(os.listdir(folder))
    size = sum(os.path.getsize(os.path.join(folder, n)) for n in names)
    log('%d wheels, %.1f MB in %s: %s' % (len(names), size / 1e6, folder, ' '.join(names)))
    return 0


def parse_set(text):
    key, sep, value = text.partition('=')
    if not sep or not key.startswith('sandbox.'):
        raise argparse.ArgumentTypeError('--set takes sandbox.KEY=VALUE, not %r' % text)
    try:
        value = json.loads(value)
    except ValueError:
        pass   # a string
    return key[len('sandbox.'):], value


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument('--make-wheelhouse', metavar='DIR', help='download requirements.txt but torch into DIR and stop')
    ap.add_argument('--python-version', default='3.12',
                    help="the GPU machine's Python, for --make-wheelhouse (the lent image's python3 is 3.12)")
    ap.add_argument('--out', metavar='DIR', help='where the report, the table, the logs and results go')
    ap.add_argument('--device', default='cuda', choices=('cuda', 'cpu'))
    ap.add_argument('--quick', action='store_true', help='the CPU dry run: fewer probes, no training tests')
    ap.add_argument('--wheelhouse', metavar='DIR', help='install missing packages from DIR (pip, no index)')
    ap.add_argument('--setup', choices=('run', 'dry-run', 'skip'), default='run',
                    help='./setup.sh: run it (root: the pool users), print what it would do, or skip it')
    ap.add_argument('--budget', type=int, default=450, help='seconds for the whole call (default 450: under 8 min)')
    ap.add_argument('--no-full', action='store_true', help='no whole regenerate at the end (cuda)')
    ap.add_argument('--set', type=parse_set, action='append', default=[], metavar='sandbox.KEY=VALUE')
    # a phase's own process
    ap.add_argument('--phase', choices=sorted(PHASES), help=argparse.SUPPRESS)
    ap.add_argument('--answer', help=argparse.SUPPRESS)
    ap.add_argument('--fixtures', help=argparse.SUPPRESS)
    ap.add_argument('--reference-only', action='store_true', help=argparse.SUPPRESS)
    ap.add_argument('--profile', help=argparse.SUPPRESS)
    ap.add_argument('--results', help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.make_wheelhouse:
        return make_wheelhouse(args.make_wheelhouse, args.python_version)
    if args.phase:
        return run_phase(args)
    if not args.out:
        ap.error('--out DIR is needed (or --make-wheelhouse DIR)')
    args.out = os.path.abspath(args.out)
    return Call(args).run()


if __name__ == '__main__':
    sys.exit(main())
