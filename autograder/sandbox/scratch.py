"""
The folders of one grading and of each of its probes, and the file system a probe sees.

    /var/lib/hw1-sandbox/hw1-sandbox-XXXX/   root:<sandbox group> 0750 (base 0711: nobody lists it)
        code/          the handout (chargpt.py, mingpt/...), the submission as mingpt/model.py, input.txt
        newroot/       empty: each probe's allow-listed root is mounted here, in its own mount namespace
        p<n>/          root 0755, one at a time, removed after its probe (numbered: the name says nothing of the test)
            log        the process's stdout/stderr (root 0600; the child holds only a descriptor)
            job/       job.json, in/inputs.npz (ONLY this probe's inputs), out/ and home/ (the user's,
                       0700; each a size-limited tmpfs where the machine allows)

With namespaces the probe sees (root_spec) the interpreter's installation and the system's
/usr, /lib*, a few /etc files, read-only; /hw1/code and /hw1/job read-only, but /hw1/job/out and
/hw1/job/home (= /tmp) writable; a fresh /proc and /dev/{null,zero,full,random,urandom}.
Nothing else: no autograder root, no export, no other submission, no other probe's folder.
Without namespaces, where Landlock is in force, the same paths at their real places are the only
ones a probe can open (landlock_rules): the wall without a new root. decoys() plants what the
self-test must find out of its reach there.
"""

import json
import os
import shutil
import tempfile

import numpy as np

from autograder import PACKAGE_DIR, REPO_ROOT
from autograder.sandbox import wall

HANDOUT_FILES = ('chargpt.py', 'mingpt/__init__.py', 'mingpt/preflight.py', 'mingpt/trainer.py', 'mingpt/utils.py')
BASE = '/var/lib/hw1-sandbox'
INSIDE_CODE, INSIDE_JOB = '/hw1/code', '/hw1/job'
SYSTEM_DIRS = ('/usr', '/lib', '/lib64', '/lib32', '/libx32', '/bin', '/sbin')
# the users and groups: generated (two lines each) in the allow-listed root, the machine's own under Landlock
ETC_USERS = ('/etc/passwd', '/etc/group', '/etc/hosts', '/etc/hostname')
ETC_FILES = ('/etc/ld.so.cache', '/etc/ld.so.conf', '/etc/ld.so.conf.d', '/etc/localtime', '/etc/nsswitch.conf')
DEVICES = ('null', 'zero', 'full', 'random', 'urandom')
ENV = {'PATH': '/usr/local/bin:/usr/bin:/bin', 'LANG': 'C.UTF-8', 'PYTHONHASHSEED': '0',
       'PYTHONDONTWRITEBYTECODE': '1', 'PYTHONUNBUFFERED': '1', 'OMP_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1',
       'OPENBLAS_NUM_THREADS': '1'}


def base(sandboxed):
    """Where scratch folders go: never under /tmp (with namespaces that is the probe's own tmpfs)."""
    if sandboxed:
        os.makedirs(BASE, mode=0o711, exist_ok=True)
        os.chmod(BASE, 0o711)   # others may traverse to their own scratch, never list
        return BASE
    return tempfile.gettempdir()


def make_grading(model_py, handout_dir, data_file, user, need_data):
    """The grading's scratch folder with code/ filled in; returns its path."""
    scratch = tempfile.mkdtemp(prefix='hw1-sandbox-', dir=base(user is not None))
    if user:
        os.chown(scratch, 0, user[1])   # at once: a sweep after a killed grading finds it by this group
    code = os.path.join(scratch, 'code')
    os.makedirs(os.path.join(code, 'mingpt'))
    os.makedirs(os.path.join(scratch, 'newroot'), mode=0o700)
    for rel in HANDOUT_FILES:
        src = os.path.join(handout_dir, rel)
        if not os.path.isfile(src):
            raise FileNotFoundError("handout file %s is missing: run `python -m autograder build-template`" % src)
        shutil.copyfile(src, os.path.join(code, rel))
    shutil.copyfile(model_py, os.path.join(code, 'mingpt', 'model.py'))
    if need_data:
        if not os.path.isfile(data_file):
            raise FileNotFoundError("corpus %s is missing: run ./setup.sh" % data_file)
        shutil.copyfile(data_file, os.path.join(code, 'input.txt'))
    for root, dirs, files in os.walk(code):   # readable, never writable, by the child
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    os.chmod(code, 0o755)
    if user:
        os.chmod(scratch, 0o750)   # root:<the user's own group>: no other grading's user enters
    else:
        os.chmod(scratch, 0o700)
    return scratch


class ProbeFolder:
    """p<n>/ of a grading (`name`): made by __init__, removed by remove()."""

    def __init__(self, scratch, name, inputs, user, tmpfs=None):
        self.path = os.path.join(scratch, name)
        self.job = os.path.join(self.path, 'job')
        self.out, self.home = os.path.join(self.job, 'out'), os.path.join(self.job, 'home')
        self.inputs = os.path.join(self.job, 'in', 'inputs.npz')
        self.log = os.path.join(self.path, 'log')
        self.mounts = []
        os.makedirs(os.path.join(self.job, 'in'))
        with open(self.inputs, 'wb') as f:
            np.savez(f, **inputs)
        for folder in (self.out, self.home):
            os.mkdir(folder)
            if tmpfs:   # size_mb, inodes: the child can fill neither the disk nor the inode table
                wall.mount_tmpfs(folder, *tmpfs)
                self.mounts.append(folder)
            if user:
                os.chown(folder, *user)
            os.chmod(folder, 0o700)
        for folder in (self.path, self.job, os.path.join(self.job, 'in')):
            os.chmod(folder, 0o755)
        os.chmod(self.inputs, 0o644)

    def write_job(self, job):
        with open(os.path.join(self.job, 'job.json'), 'w') as f:
            json.dump(job, f)
        os.chmod(os.path.join(self.job, 'job.json'), 0o644)

    def remove(self):
        for folder in self.mounts:
            wall.umount(folder)   # drops every file at once
        self.mounts = []
        shutil.rmtree(self.path, ignore_errors=True)


def inside_paths(folder, namespaces, code):
    """The paths a probe process uses, as it sees them."""
    if namespaces:
        return {'code': INSIDE_CODE, 'job': INSIDE_JOB, 'inputs': INSIDE_JOB + '/in/inputs.npz',
                'out': INSIDE_JOB + '/out', 'home': INSIDE_JOB + '/home'}
    return {'code': code, 'job': folder.job, 'inputs': folder.inputs, 'out': folder.out, 'home': folder.home}


def _covering(paths):
    """The shortest list of folders covering `paths` (a path under another is dropped)."""
    kept = []
    for p in sorted({os.path.realpath(p) for p in paths if p and os.path.isdir(p)}):
        if not any(p == k or p.startswith(k.rstrip('/') + '/') for k in kept):
            kept.append(p)
    return kept


def interpreter_dirs(zygote_info, extra=()):
    """The installation the zygote's interpreter loads from (prefixes and sys.path), never the grader's own tree."""
    dirs = _covering(list(zygote_info.get('prefixes', [])) + list(zygote_info.get('path', [])) + list(extra))
    secret = [os.path.realpath(REPO_ROOT), os.path.realpath(PACKAGE_DIR)]
    return [d for d in dirs if not any(s == d or s.startswith(d.rstrip('/') + '/') for s in secret)
            and not d.startswith(os.path.realpath(PACKAGE_DIR) + '/')]


def gpu_extras(devices=DEVICES):
    """(devices, extra read-only folders) of a probe: on the gpu profile the driver's devices, and /sys for its
    library."""
    if not os.path.exists('/dev/nvidiactl'):
        return devices, ()
    return devices + tuple(d for d in sorted(os.listdir('/dev')) if d.startswith('nvidia')), ('/sys',)


def landlock_rules(scratch, folder, interpreter, devices=DEVICES, extra_ro=()):
    """
    wall.restrict_landlock's allow-list of a probe without namespaces: what root_spec would bind, at its real
    place. Read: the system folders, the interpreter, a few /etc files, /proc (its own; another process's files
    need ptrace rights the sandbox user lacks, and Landlock refuses them across its wall), the grading's code and
    the probe's job folder. Write: its out/ and home/ (TMPDIR). Devices: /dev/null and the like. Nothing else:
    not /tmp, /var/tmp or /dev/shm, not /root or /home, not the scratch folders of other probes or gradings.
    """
    read = [d for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)]
    read += [d for d in interpreter if d not in read]
    read += [p for p in ETC_FILES + ETC_USERS if os.path.exists(p)]
    read += ['/proc'] + list(extra_ro) + [os.path.join(scratch, 'code'), folder.job]
    return {'read': read, 'write': [folder.out, folder.home],
            'devices': ['/dev/' + d for d in devices if os.path.exists('/dev/' + d)]}


def decoys(name):
    """
    Files the Landlock self-test must find it cannot read, and folders it must find it cannot write to, though
    both are open to everyone: one five folders deep under /tmp, one in /var/tmp, one in /dev/shm (where copies
    were left that no search found). Returns (files, folders, tops): remove_decoys(tops) removes them. Their
    names mean nothing to the copies search (it must not take them for copies of the grader).
    """
    files, folders, tops = [], [], []
    for top, depth in (('/tmp', 5), ('/var/tmp', 1), ('/dev/shm', 1)):
        if not os.path.isdir(top):
            continue
        made = tempfile.mkdtemp(prefix='hw1-decoy-', dir=top)
        tops.append(made)
        folder = os.path.join(made, *['d%d' % i for i in range(1, depth)]) if depth > 1 else made
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, name)
        with open(path, 'w') as f:
            f.write('hw1 decoy: a probe must not read this\n')
        os.chmod(path, 0o644)
        for d in [made] + [os.path.join(made, *['d%d' % i for i in range(1, k + 1)]) for k in range(1, depth)]:
            os.chmod(d, 0o777)   # open to everyone: only the wall can keep a probe out
        files.append(path)
        folders.append(folder)
    return files, folders, tops


def remove_decoys(tops):
    for top in tops:
        shutil.rmtree(top, ignore_errors=True)


def root_spec(scratch, folder, interpreter, user, user_name, devices=DEVICES, extra_ro=()):
    """wall.build_root's description of a probe's file system."""
    ro, links = [], {}
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            links[d] = os.readlink(d)
        elif os.path.isdir(d):
            ro.append((d, d))
    for d in interpreter:
        if not any(d == s or d.startswith(s + '/') for s, _ in ro):
            ro.append((d, d))
    for path in ETC_FILES:
        if os.path.islink(path):
            links[path] = os.readlink(path)
        elif os.path.exists(path):
            ro.append((path, path))
    ro += [(p, p) for p in extra_ro]
    ro += [(os.path.join(scratch, 'code'), INSIDE_CODE), (folder.job, INSIDE_JOB)]
    uid, gid = user or (0, 0)
    files = {'/etc/passwd': 'root:x:0:0:root:/root:/usr/sbin/nologin\n%s:x:%d:%d::%s/home:/usr/sbin/nologin\n'
                            % (user_name, uid, gid, INSIDE_JOB),
             '/etc/group': 'root:x:0:\n%s:x:%d:\n' % (user_name, gid),
             '/etc/hosts': '127.0.0.1 localhost\n', '/etc/hostname': 'hw1-sandbox\n'}
    return {'dir': os.path.join(scratch, 'newroot'), 'ro': ro, 'rw': [(folder.home, '/tmp')], 'files': files,
            'symlinks': links, 'devices': [d for d in devices if os.path.exists('/dev/' + d)]}
