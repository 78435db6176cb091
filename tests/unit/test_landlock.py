"""
The Landlock wall of a probe without namespaces (autograder/sandbox/wall.py restrict_landlock, scratch.py
landlock_rules): a process that restricts itself to an allow-list can open nothing else, though the files are open
to everyone; the rights each ABI version can name; the defence's level (fail closed) and the words for a machine that
has neither namespaces nor Landlock. The self-test that proves it in a grading is tests/e2e/test_sandbox_process.py's.
"""

import json
import os
import subprocess
import sys

import pytest

from autograder.sandbox import cli, defences, scratch, wall
from autograder.sandbox.zygote_handle import WALL_FILE

ABI = wall.landlock_abi()
needs_landlock = pytest.mark.skipif(ABI < 1, reason='the kernel offers no Landlock here (%d)' % ABI)

# run in a fresh interpreter: the wall module loaded by its path, as the zygote loads it; prints what it could do
RESTRICTED = r'''
import importlib.util, json, os, sys
spec = importlib.util.spec_from_file_location('hw1_wall', sys.argv[1])
wall = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wall)
rules = json.loads(sys.argv[2])

def can(fn):
    try:
        fn()
        return True
    except OSError as e:
        return type(e).__name__

def write(path):
    with open(path, 'w') as f:
        f.write('x')

abi = wall.restrict_landlock(rules)
allowed, decoy, out, shared = sys.argv[3:7]
got = {'abi': abi,
       'read allowed': can(lambda: open(allowed).read()),
       'read decoy': can(lambda: open(decoy).read()),
       'list decoy folder': can(lambda: os.listdir(os.path.dirname(decoy))),
       'list /': can(lambda: os.listdir('/')),
       'write out': can(lambda: write(os.path.join(out, 'f'))),
       'write shared': can(lambda: write(os.path.join(shared, 'f'))),
       'dev/null': can(lambda: open('/dev/null', 'w').write('x')),
       'import a module not yet loaded': can(lambda: __import__('xml.dom.minidom'))}
pid = os.fork()   # a child keeps the wall: it cannot be left
if pid == 0:
    os._exit(0 if can(lambda: open(decoy).read()) is not True else 1)
got['child reads decoy'] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0
print(json.dumps(got))
'''


@needs_landlock
def test_a_restricted_process_opens_only_its_allow_list(tmp_path):
    allowed, decoy_dir, out, shared = (tmp_path / n for n in ('code', 'a/b/c/d/e', 'out', 'shared'))
    for d in (allowed, decoy_dir, out, shared):
        d.mkdir(parents=True)
    (allowed / 'model.py').write_text('ok')
    (decoy_dir / 'draw.key').write_text('secret')
    for d in [tmp_path] + list(tmp_path.rglob('*')):
        os.chmod(d, 0o777 if d.is_dir() else 0o644)   # open to everyone: only Landlock can refuse
    prefixes = sorted({sys.prefix, sys.base_prefix, sys.exec_prefix})
    rules = {'read': list(scratch.SYSTEM_DIRS) + prefixes + [str(allowed)], 'write': [str(out)],
             'devices': ['/dev/null']}
    proc = subprocess.run([sys.executable, '-I', '-c', RESTRICTED, WALL_FILE, json.dumps(rules),
                           str(allowed / 'model.py'), str(decoy_dir / 'draw.key'), str(out), str(shared)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got == {'abi': ABI, 'read allowed': True, 'read decoy': 'PermissionError',
                   'list decoy folder': 'PermissionError', 'list /': 'PermissionError', 'write out': True,
                   'write shared': 'PermissionError', 'dev/null': True, 'import a module not yet loaded': True,
                   'child reads decoy': False}, got
    assert (out / 'f').read_text() == 'x' and not (shared / 'f').exists()
    assert (decoy_dir / 'draw.key').read_text() == 'secret'   # this process, outside the wall, still reads it


def test_a_kernel_without_landlock_fails_the_wall_closed():
    """A spec that asks for Landlock on a kernel that cannot give it raises: the probe's wall fails (wall_failed), the
    grading is refused, and the process never runs on unrestricted."""
    code = ('import importlib.util, sys; spec = importlib.util.spec_from_file_location("w", sys.argv[1]); '
            'w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w); '
            'w.landlock_abi = lambda: -38; '   # ENOSYS, as a kernel before 5.13 answers
            'w.restrict_landlock({"read": ["/usr"]}); print("RAN UNRESTRICTED")')
    proc = subprocess.run([sys.executable, '-I', '-c', code, WALL_FILE], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and 'RAN UNRESTRICTED' not in proc.stdout, proc.stdout
    assert 'OSError: [Errno 38] Landlock: Function not implemented' in proc.stderr, proc.stderr[-500:]


def test_the_rights_follow_the_abi_version():
    handled1, read1, write1, device1 = wall.landlock_rights(1)
    assert handled1 == (1 << 13) - 1 and not write1 & (wall.FS_REFER | wall.FS_TRUNCATE)
    assert wall.landlock_rights(2)[2] & wall.FS_REFER and not wall.landlock_rights(2)[2] & wall.FS_TRUNCATE
    assert wall.landlock_rights(3)[2] & wall.FS_TRUNCATE and not wall.landlock_rights(4)[3] & wall.FS_IOCTL_DEV
    handled7, read7, write7, device7 = wall.landlock_rights(7)
    assert device7 & wall.FS_IOCTL_DEV and handled7 == (1 << 16) - 1
    for rights in (read7, device7):
        assert not rights & (wall.FS_MAKE_REG | wall.FS_REMOVE_FILE | wall.FS_MAKE_DIR)   # nothing made or removed
    assert not write7 & (wall.FS_EXECUTE | wall.FS_MAKE_CHAR | wall.FS_MAKE_BLOCK)   # nothing run from out/ or home/


def test_the_allow_list_is_the_allow_listed_roots(tmp_path):
    folder = scratch.ProbeFolder(str(tmp_path), 'p1', {}, None)
    rules = scratch.landlock_rules(str(tmp_path), folder, ['/opt/somewhere'])
    assert rules['write'] == [folder.out, folder.home]
    assert {str(tmp_path / 'code'), folder.job, '/proc', '/opt/somewhere', '/usr'} <= set(rules['read'])
    never = {'/', '/tmp', '/var/tmp', '/dev/shm', '/dev', '/root', '/home', '/etc'}
    assert not never & set(rules['read'] + rules['write'])
    assert '/dev/null' in rules['devices'] and '/dev/shm' not in rules['devices']


# ----------------------------------------------------------------------------- the defence's level

ALL = {'user': True, 'seccomp': True, 'namespaces': True, 'cgroups': True, 'landlock': True}
LEVELS = {'user': 'required', 'seccomp': 'required', 'namespaces': 'if_available', 'cgroups': 'if_available',
          'landlock': 'if_available'}
NO_NS = dict(ALL, namespaces='no CAP_SYS_ADMIN', cgroups='read-only /sys/fs/cgroup')


def test_landlock_is_the_wall_without_namespaces_and_unused_with_them(monkeypatch):
    monkeypatch.delenv('HW1_SANDBOX_DISABLE', raising=False)
    plan = defences.plan(LEVELS, NO_NS)
    assert plan['landlock'] == (True, 'in force')
    text = defences.describe(plan)
    assert text['filesystem'].startswith('Landlock allow-list') and 'wall' not in text
    with_ns = defences.plan(LEVELS, ALL)
    assert with_ns['landlock'] == (False, defences.NOT_NEEDED)
    assert defences.describe(with_ns)['lacks'] == []   # not used is not lacking


def test_no_namespaces_and_no_landlock_is_said_plainly(monkeypatch):
    monkeypatch.delenv('HW1_SANDBOX_DISABLE', raising=False)
    missing = dict(NO_NS, landlock=defences.LANDLOCK_MISSING[38])   # ENOSYS
    with pytest.raises(defences.SandboxRefused, match='requires the landlock defence'):
        defences.plan(dict(LEVELS, landlock='required'), missing)
    text = defences.describe(defences.plan(LEVELS, missing))
    assert 'landlock: the kernel has no Landlock' in ' '.join(text['lacks'])
    assert text['wall'] == defences.SINGLE_TENANT and 'single-tenant machine' in text['wall']
    assert text['filesystem'].startswith('the whole machine')
    lines, safe = cli.describe(dict(text, selftest={'filesystem': True}))
    assert safe and 'safe only on a single-tenant machine' in lines[-1], lines[-1]
    assert any(line.split()[0] == 'wall' and 'NOT a wall' in line for line in lines)
    landlock_lines, _ = cli.describe(dict(defences.describe(defences.plan(LEVELS, NO_NS)),
                                          selftest={'filesystem': True}))
    assert 'single-tenant' not in landlock_lines[-1]
    monkeypatch.setenv('HW1_SANDBOX_DISABLE', 'landlock')
    assert defences.plan(LEVELS, NO_NS)['landlock'] == (False, 'turned off by HW1_SANDBOX_DISABLE')


def test_the_machines_landlock_is_read_from_the_kernel():
    caps = defences.capabilities(None)
    assert caps['landlock'] is True if ABI >= 1 else caps['landlock'] in defences.LANDLOCK_MISSING.values() or \
        caps['landlock'].startswith('landlock_create_ruleset failed')


def test_the_seccomp_filter_denies_none_of_landlocks_calls():
    """Landlock comes first (wall.enter), but a filter that denied its calls would also stop a probe's own children
    from adding a stricter wall: none of 444-446 is denied, on any architecture the filter knows."""
    from autograder.sandbox import seccomp
    for machine, (_, nrs) in seccomp.SYSCALLS.items():
        denied = {nrs[name] for name in seccomp.DENIED if name in nrs}
        assert not denied & {wall.SYS_LANDLOCK_CREATE_RULESET, wall.SYS_LANDLOCK_ADD_RULE,
                             wall.SYS_LANDLOCK_RESTRICT_SELF}, machine
