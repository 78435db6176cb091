"""Old readback (issue-34) vs new readback + the judge's wording: every refusal, word for word."""
import importlib.util, io, json, os, shutil, struct, sys, tempfile, zipfile
import numpy as np
sys.path.insert(0, '/root/wt/words3-34')
from autograder.sandbox import readback as new
from autograder.judge import messages, probe_job
from autograder.contract import report_schema
spec = importlib.util.spec_from_file_location('old_readback', '/root/w3base/autograder/sandbox/readback.py')
old = importlib.util.module_from_spec(spec); spec.loader.exec_module(old)

def npy(a, version=None):
    b = io.BytesIO(); np.lib.format.write_array(b, np.asarray(a), version=version, allow_pickle=False); return b.getvalue()
def npz(path, members, comp=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, 'w', comp) as z:
        for n, d in members.items(): z.writestr(n, d)
SPEC = {'a': (2, 3), 'b/logits': (4,)}
cases = {}
def case(name):
    def deco(f): cases[name] = f; return f
    return deco
def rep(out, raw=None): open(os.path.join(out, 'p.json'), 'w').write(raw or '{"status": "ok", "seconds": 0.5}')
@case('fifo-json')
def _(o): os.mkfifo(os.path.join(o, 'p.json'))
@case('fifo-npz')
def _(o): rep(o); os.mkfifo(os.path.join(o, 'p.npz'))
@case('link')
def _(o): open(o + '/../secret', 'w').write('{}'); os.symlink(o + '/../secret', os.path.join(o, 'p.json'))
@case('report-too-large')
def _(o): rep(o, '{"status": "ok", "message": "%s"}' % ('x' * 300000))
for i, raw in enumerate(['{"status": "ok", "seconds": 1e400}', '{"status": "ok", "seconds": NaN}',
                         '{"status": "ok", "seconds": -Infinity}', '{"status": "ok", "seconds": -3}',
                         '[' * 100000 + ']' * 100000, '{"status": "ok"', '{"status": "ok", "seconds": %s}' % ('9' * 5000),
                         '{"status": "passed"}', '{"status": "%s"}' % ('z' * 200), '{"status": "ok", "where": [%s]}' % ','.join(['"x"'] * 1000)]):
    cases['report%d' % i] = (lambda raw: lambda o: rep(o, raw))(raw)
Z = lambda members, comp=zipfile.ZIP_STORED: (lambda o: (rep(o), npz(os.path.join(o, 'p.npz'), members, comp)))
cases['deflated'] = Z({'a.npy': npy(np.zeros((2, 3)))}, zipfile.ZIP_DEFLATED)
cases['unexpected-array'] = Z({'c.npy': npy(np.zeros(3))})
cases['unexpected-member'] = Z({'a.txt': b'hello'})
cases['long-member'] = Z({'m' * 400 + '.txt': b'hello'})
cases['strings'] = Z({'a.npy': npy(np.array([['x', 'y', 'z']] * 2))})
cases['complex'] = Z({'a.npy': npy(np.zeros((2, 3), complex))})
cases['stored'] = Z({'a.npy': npy(np.zeros((2, 3)))[:-8]})
cases['twice'] = Z({'a.npy': npy(np.zeros((2, 3))), 'a.npy ': b''})
cases['npy-v3'] = Z({'a.npy': b'\x93NUMPY\x03\x00' + b'\0' * 64})
cases['rank'] = Z({'a.npy': npy(np.zeros((1,) * 40))})
cases['members'] = Z({'x%d.npy' % i: b'' for i in range(report_schema.MAX_ARRAYS + 1)})
cases['oversized'] = Z({'a.npy': npy(np.zeros((2, 3))), 'b/logits.npy': npy(np.zeros(100000, np.int8))})
cases['not-zip'] = lambda o: (rep(o), open(os.path.join(o, 'p.npz'), 'wb').write(b'z' * 3000))
cases['tiny-not-zip'] = lambda o: (rep(o), open(os.path.join(o, 'p.npz'), 'wb').write(b'z'))
def _dup(o):
    rep(o)
    import warnings; warnings.simplefilter('ignore')
    npz(os.path.join(o, 'p.npz'), {'a.npy': npy(np.zeros((2, 3)))})
    with zipfile.ZipFile(os.path.join(o, 'p.npz'), 'a') as z: z.writestr('a.npy', npy(np.zeros((2, 3))))
cases['dup'] = _dup
def _zip64(o):
    rep(o); p = os.path.join(o, 'p.npz'); npz(p, {'a.npy': npy(np.zeros((2, 3)))})
    d = open(p, 'rb').read(); i = d.rfind(b'PK\x05\x06')
    open(p, 'wb').write(d[:i] + b'PK\x06\x07' + b'\0' * 16 + d[i:])
cases['zip64'] = _zip64
def _manydir(o):
    rep(o); p = os.path.join(o, 'p.npz'); npz(p, {'a.npy': npy(np.zeros((2, 3)))})
    d = bytearray(open(p, 'rb').read()); i = d.rfind(b'PK\x05\x06'); struct.pack_into('<H', d, i + 10, 5000)
    open(p, 'wb').write(bytes(d))
cases['dir-count'] = _manydir
cases['missing-folder'] = None

results, n = [], 0
for name, make in cases.items():
    for spec in (SPEC, None):
        tmp = tempfile.mkdtemp(); o = os.path.join(tmp, 'out'); os.mkdir(o)
        if make is None: o = os.path.join(tmp, 'nope')
        else: make(o)
        a = old.read_probe(o, 'p', spec); b = new.read_probe(o, 'p', spec)
        shutil.rmtree(tmp)
        if a is None or b is None:
            assert a is None and b is None, name; continue
        bw = probe_job.worded('p', b, None)
        old_ref = a.refused; new_ref = {k: messages.array_not_read(v) for k, v in bw.refused.items()}
        same = (a.status, a.message, old_ref, sorted(a.arrays), a.info, a.seconds) == \
               (bw.status, bw.message, new_ref, sorted(bw.arrays), bw.info, bw.seconds)
        n += 1
        print('%-18s %-5s %s | %s' % (name, 'spec' if spec else 'none', 'same' if same else 'DIFF', (a.message or str(old_ref))[:110]))
        if not same: print('   old', a.status, a.message, old_ref, '\n   new', bw.status, bw.message, new_ref); results.append(name)
# an upload's zip directory (submission.py)
for maker in (lambda p: open(p, 'wb').write(b'x'), lambda p: open(p, 'wb').write(b'x' * 100)):
    p = tempfile.mktemp(suffix='.zip'); maker(p)
    for mod in (old, new):
        try:
            with open(p, 'rb') as f: mod.check_zip_directory(f, os.path.getsize(p), 10, 'up.zip')
        except mod.Unreadable as e:
            txt = str(e) if mod is old else messages.unreadable(e.reason, e.figures)
            print('zip', 'old' if mod is old else 'new', txt)
print('%d compared, %d differ: %s' % (n, len(results), results))
