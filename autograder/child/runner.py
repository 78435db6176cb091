"""
Runs INSIDE the sandbox, in a fresh process per probe (forked by child/zygote.py behind the
wall): applies the probe's own limits, imports the student's mingpt/model.py, runs ONE probe
(or only the import, for the import check) on the inputs the harness wrote for it, and hands
back plain arrays (.npz) and small JSON in the format of report_schema.py. It judges nothing: every
comparison happens in the harness, after every process of the probe has ended.

JOB_DIR/job.json holds the paths as this process sees them: `code` (the handout's chargpt.py and
mingpt/, the student's mingpt/model.py, input.txt), `inputs` (this probe's inputs.npz, nothing
else), `out` (its results) and `home` (its TMPDIR), and what the harness decided for this process:
`set_aside` (parts built without the student's code: child/set_aside.py) and `skip_cases` (cases
not to run). It does not name the probe: the zygote hands the probe's id to run_probe() in memory, so no
file tells student code which test it is in beyond what its inputs do.
"""

import io
import json
import os
import sys
import time
import traceback

import numpy as np
import torch

from . import adapter, evidence
from autograder.contract import report_schema
from autograder.contract.configs import MODEL_CONFIGS

JOB_DIR = OUT = None   # set by run_probe(): the job folder and the probe's out/
_PROBES = {}            # test id -> probe function (load_probes)


class CappedStream(io.TextIOBase):
    """Keeps the first report_schema.STDOUT_CAP characters of what student code prints; drops the rest."""

    def __init__(self):
        self.parts, self.size, self.dropped = [], 0, 0

    def writable(self):
        return True

    def write(self, s):
        s = str(s)
        keep = max(0, report_schema.STDOUT_CAP - self.size)
        self.parts.append(s[:keep])
        self.size += min(len(s), keep)
        self.dropped += len(s) - min(len(s), keep)
        return len(s)

    def take(self):
        text = ''.join(self.parts) + ('\n[... %d more characters dropped]' % self.dropped if self.dropped else '')
        self.parts, self.size, self.dropped = [], 0, 0
        return text


def student_frames(tb, e=None):
    """The traceback lines that point into the student's model.py (what they can act on); where none: frames_behind."""
    frames = traceback.extract_tb(tb)
    mine = [f for f in frames if f.filename.endswith(os.path.join('mingpt', 'model.py'))] or frames_behind(e)
    return ['%s line %d, in %s: %s' % ('model.py' if f in mine else os.path.basename(f.filename), f.lineno, f.name,
                                      (f.line or '').strip()) for f in (mine or frames[-3:])]


def describe_exception(e):
    """(status, error fields) of an exception: its text and traceback lines, or its facts where the
    judge words it (report_schema.ERROR_FACTS: a sys.exit, or the grader's own FactError)."""
    kind = 'not_implemented' if isinstance(e, NotImplementedError) else 'error'
    error = fact_error('exit', repr(e.code)) if isinstance(e, SystemExit) else \
        report_schema.error_fields(e)
    if error is None:   # the student's own exception (or a FactError whose figures do not fit)
        error = {'message': '%s: %s' % (type(e).__name__, str(e)[:1500])}
    return kind, dict(error, where=student_frames(e.__traceback__, e))


def fact_error(fact, text):
    """An error of kind `fact` about `text` (a repr); message_chars: its length, which the report's
    cap may cut (the harness cuts its sentence as if the child had cut the whole sentence)."""
    return {'fact': fact, 'message': text, 'message_chars': len(text)}


class Context:
    skip = frozenset()   # cases the harness set aside with nothing in their place (job['skip_cases'])

    def __init__(self, job):
        self.job = job
        self.profile = job['profile']
        self.skip = set(job.get('skip_cases') or ())   # cases the harness set aside with nothing in their place
        self.device = torch.device(self.profile['device'])
        self.scratch = job['paths']['code']   # input.txt and the handout are here
        self.inputs = np.load(job['paths']['inputs'], allow_pickle=False)
        self.arrays, self.info = {}, {}

    def t(self, key):
        return torch.from_numpy(self.inputs[key].copy()).to(self.device)

    def weights(self, label):
        p = 'w/%s/' % label
        return {k[len(p):]: torch.from_numpy(self.inputs[k].copy()) for k in self.inputs.files if k.startswith(p)}

    def state(self, label):
        p = 'model/%s/' % label
        return {k[len(p):]: torch.from_numpy(self.inputs[k].copy()) for k in self.inputs.files if k.startswith(p)}

    def case(self, name, fn):
        """Run one case; its failure is recorded and the probe goes on with the next case."""
        if name in self.skip or name.split('/')[0] in self.skip:   # a case, or every case of a configuration
            return
        evidence.begin(name)
        try:
            torch.manual_seed(0)
            out = fn()
        except BaseException as e:  # SystemExit too: student code must not end the probe
            if isinstance(e, KeyboardInterrupt):
                raise
            evidence.failed(name)
            kind, error = describe_exception(e)
            self.info.setdefault('case_errors', {})[name] = dict(error, status=kind)
            return
        finally:
            evidence.end()
        for key, value in (out if isinstance(out, dict) else {'': out}).items():
            full = name + ('/' + key if key else '')
            if isinstance(value, torch.Tensor):
                self.arrays[full] = value.detach().to('cpu').numpy() if value.dtype != torch.bfloat16 \
                    else value.detach().float().cpu().numpy()
            elif value is not None:
                self.arrays[full] = np.asarray(value)

    def note(self, *notes):
        for n in notes:
            kept = self.info.setdefault('notes', [])
            if n and n not in kept and len(kept) < report_schema.MAX_NOTES:
                kept.append(n)

    def attention(self, kind, label, n_kv_head, **fields):
        mod, m = self.profile['module'], adapter
        cfg = m.make_config(n_layer=1, n_embd=mod['n_embd'], n_query_head=mod['n_query_head'], n_kv_head=n_kv_head,
                            vocab_size=self.profile['model']['vocab_size'],
                            block_size=fields.pop('block_size', mod['block_size']), **fields)
        module = m.attention(kind, cfg)
        self.note(*m.load_attention(module, self.weights(label), mod['n_embd']))
        return module.to(self.device)

    def gqa_set_aside(self, n_kv_head, rope, n_query_head=None):
        """How a GPT that would run the student's GroupedQueryAttention the harness set aside runs instead: 'gqa'
        at n_kv_head = n_query_head (the given Block builds their CausalSelfAttention), 'gqa_rope' with rope=False
        (their GQA without RoPE, which their 4.1 passed); None: as asked."""
        if n_kv_head == (n_query_head or self.profile['model']['n_query_head']):
            return None
        if 'gqa' in adapter.SET_ASIDE:
            return 'gqa'
        return 'gqa_rope' if 'gqa_rope' in adapter.SET_ASIDE and rope else None

    def model(self, label, n_kv_head, rope):
        m = self.profile['model']
        instead = self.gqa_set_aside(n_kv_head, rope)
        if instead:   # the configurations of contract/configs.py that have weights: 'rope' (MHA) and 'gqa' (no RoPE)
            label, n_kv_head, rope = ('rope', m['n_query_head'], True) if instead == 'gqa' else \
                ('gqa', dict((l, kv) for l, kv, _ in MODEL_CONFIGS)['gqa'], False)
        cfg = adapter.make_config(n_layer=m['n_layer'], n_embd=m['n_embd'], n_query_head=m['n_query_head'], rope=rope,
                                  n_kv_head=n_kv_head, vocab_size=m['vocab_size'], block_size=m['block_size'])
        model = adapter.gpt(cfg)
        self.info.setdefault('has_wpe', {})[label] = any('wpe' in n for n, _ in model.named_parameters())
        self.note(*adapter.load_gpt(model, self.state(label), m['n_embd']))
        return model.to(self.device).eval()



# ----------------------------------------------------------------------------- main


def load_probes():
    """{test id: probe function} from every probes*.py of this package: probe_sliding_window_memory runs
    'sliding-window-memory'. The zygote loads them before it forks (the package folder is not in a
    probe's file system); the table is the same in every fork."""
    import importlib
    import pkgutil
    if not _PROBES:
        for m in pkgutil.iter_modules([os.path.dirname(os.path.abspath(__file__))]):
            if m.name.startswith('probes'):
                module = importlib.import_module('.' + m.name, __package__)
                for name, fn in vars(module).items():
                    if name.startswith('probe_') and callable(fn):
                        _PROBES[name[len('probe_'):].replace('_', '-')] = fn
    return _PROBES


def probe_table():
    return load_probes()


def write_result(probe_id, arrays, info):
    """The probe's arrays (np.savez: STORED members, the only kind the harness reads) and its report, clipped."""
    tmp = os.path.join(OUT, '.%s.tmp' % probe_id)
    with open(tmp + '.npz', 'wb') as f:
        np.savez(f, **arrays)
    os.replace(tmp + '.npz', os.path.join(OUT, report_schema.arrays_name(probe_id)))
    with open(tmp, 'w') as f:
        json.dump(report_schema.clip_report(info), f, allow_nan=False)
    os.replace(tmp, os.path.join(OUT, report_schema.report_name(probe_id)))


def apply_limits(limits):
    """
    This probe's own limits, before model.py is imported (grading.yaml or the caller's job['limits']):
    address_space_margin_mb caps RLIMIT_AS at the current VmSize plus the margin, soft = hard, so
    that one allocation larger than the margin fails whatever the student's code does later.
    """
    margin = (limits or {}).get('address_space_margin_mb')
    if margin is None:
        return
    import resource
    from autograder.contract.memory_readings import proc_status
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = proc_status(os.getpid())['VmSize'] + int(margin) * 1024 * 1024
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def arm_hang_dump(out):
    """
    faulthandler dumps every thread's Python stack into out/HANG_DUMP on report_schema.HANG_SIGNAL: the harness
    sends it at a deadline or wall cap and kills the process a moment later, so that the message can
    name the line of model.py that was running. Armed before model.py is imported (the import can hang
    too); student code can unset it, and then there is no dump (the message names no line).
    """
    import faulthandler
    import signal
    try:
        fd = os.open(f'{out}/{report_schema.HANG_DUMP}', os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        faulthandler.register(signal.Signals(report_schema.HANG_SIGNAL), file=os.fdopen(fd, 'w'), all_threads=True)
    except (OSError, ValueError, RuntimeError):
        pass   # no dump: the harness reports the hang without a line


def tell_imported():
    """One frame on the harness link once model.py is imported (the harness then knows a later stop is not the
    import's). Student code could send it earlier: that only makes a hang at import look like the test's own."""
    from . import socket_link
    if socket_link.connected():
        try:
            socket_link.ask(report_schema.IMPORTED)
        except OSError:
            pass


def run_probe(job_dir, probe_id=None):
    """One probe (`probe_id`, from the zygote; job['probe'] only where a test runs a probe in-process; 'import'
    only imports model.py). Returns the exit code."""
    global JOB_DIR, OUT
    JOB_DIR = os.path.abspath(job_dir)
    with open(os.path.join(JOB_DIR, 'job.json')) as f:
        job = json.load(f)
    probe_id, paths = probe_id or job['probe'], job['paths']
    OUT = paths['out']
    arm_hang_dump(OUT)
    sys.path.insert(0, paths['code'])   # mingpt/ (the student's model.py) and chargpt.py
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True, warn_only=True)
    # before model.py is imported, so that `from torch.cuda import memory_allocated` gets them: the torch.cuda
    # memory queries that the memory probe's CUDA view answers (outside it: what CPU torch answers)
    from . import cuda_view
    cuda_view.install()
    apply_limits(job['limit'] if 'limit' in job else job.get('limits', {}).get(probe_id))
    captured = CappedStream()
    sys.stdout = sys.stderr = captured

    t0 = time.time()
    try:
        import mingpt.model  # noqa: F401  (the student's file)
        info = {'status': 'ok'}
        tell_imported()
    except BaseException as e:
        _, error = describe_exception(e)
        if isinstance(e, ModuleNotFoundError):   # a module the grader does not provide: a fact
            error = dict(fact_error('missing_module', repr(e.name)), where=error['where'])
        info = dict(error, status='error')
        if probe_id != report_schema.IMPORT:   # the import failed in a test's process
            chars = info.get('message_chars', len(info['message']))
            info.update(stage='import', message_chars=chars)
    if probe_id == report_schema.IMPORT or info['status'] != 'ok':
        info.update(seconds=time.time() - t0, stdout=captured.take())
        write_result(probe_id, {}, info)
        return 0

    ctx = Context(job)
    adapter.SET_ASIDE = set(job.get('set_aside') or ())
    evidence.start(job)
    t0 = time.time()
    try:
        probe_table()[probe_id](ctx)
        ctx.info['status'] = 'ok'
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        kind, error = describe_exception(e)
        ctx.info.update(error, status=kind)
    if aside := adapter.SET_ASIDE:   # whether the grader's RoPE was really built (the harness words it; set_aside.py)
        from .set_aside import BUILT
        ctx.info['set_aside'] = {'built': sorted(BUILT & aside), 'kept': sorted(adapter.KEPT & aside)}
    evidence.collect(ctx.arrays, ctx.info)
    ctx.info.update(seconds=time.time() - t0, stdout=captured.take())
    write_result(probe_id, ctx.arrays, ctx.info)
    return 0


def main(job_dir=None, probe_id=None):
    """Run the probe of JOB_DIR (sys.argv[1]) in this process: what a zygote's fork does after the wall."""
    return run_probe(job_dir or sys.argv[1], probe_id)


def frames_behind(e):
    """
    model.py's frames behind an error raised inside torch whose own traceback holds none (issue 41: the line
    shown was torch's, e.g. module.py's "has no attribute"): those of the error it was raised from or while
    handling (its chain, nearest first); else, where the deepest frame is a method of an object of a class
    model.py defines, that class's line, or the property's where torch's nn.Module.__getattr__ took over from
    a property of theirs that raised AttributeError. [] when nothing of model.py led to it (a grader's frame
    is then shown). Kept at the end of the file: the lines above are in tracebacks (test_child_lines.py).
    """
    try:
        return _frames_behind(e) if e is not None else []
    except Exception:  # noqa: BLE001  the student's objects answer the look-ups here: a failure shows what it did before
        return []


def _frames_behind(e):
    import inspect   # here, not at the top: a line added there would move every line below it
    is_model = lambda path: (path or '').endswith(os.path.join('mingpt', 'model.py'))
    seen, inner = set(), e.__cause__ or e.__context__
    while inner is not None and id(inner) not in seen:
        seen.add(id(inner))
        mine = [f for f in traceback.extract_tb(inner.__traceback__) if is_model(f.filename)]
        if mine:
            return mine
        inner = inner.__cause__ or inner.__context__
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    frame_locals = tb.tb_frame.f_locals if tb is not None else {}
    cls = type(frame_locals.get('self'))
    if not is_model(getattr(sys.modules.get(cls.__module__), '__file__', None)):
        return []
    prop = getattr(cls, frame_locals.get('name') or '', None) if tb.tb_frame.f_code.co_name == '__getattr__' else None
    target = prop.fget if isinstance(prop, property) and prop.fget is not None else cls
    try:
        lines, first = inspect.getsourcelines(target)
        path = inspect.getsourcefile(target)
    except (OSError, TypeError):
        return []
    at = next((i for i, t in enumerate(lines) if t.lstrip().startswith(('def ', 'class '))), 0)   # past decorators
    return [traceback.FrameSummary(path, first + at, getattr(target, '__qualname__', cls.__name__), lookup_line=False,
                                   line=lines[at].strip())]
