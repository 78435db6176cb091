"""
Which defences a grading runs behind, and why: fail closed, nothing downgraded silently.

grading.yaml's sandbox.defences gives each defence a level:
  required      the machine must give it; if it cannot, or the self-test finds it not holding,
                no student code runs and the grading says so to staff (SandboxRefused);
  if_available  used whenever the machine gives the privilege it needs (root with CAP_SYS_ADMIN
                for namespaces, a writable cgroup hierarchy for cgroups, a kernel with Landlock
                for landlock). Where the privilege is
                there, it is as good as required: a failure stops the grading. Where it is not,
                the grading runs without it and results.json's extra_data.isolation says what
                was missing and why (the weaker mode staff chose);
  off           not used (staff's choice, stated the same way).

landlock is the file-system wall where namespaces are not in force (Gradescope's Docker): the probe
may open only an allow-list, the paths the allow-listed root would hold (wall.restrict_landlock).
With namespaces the root is the wall and Landlock is not used. With neither, the file system is
the whole machine as the sandbox user sees it, guarded by a search (copies.py) that refuses a
grading while any copy of the grader it finds is readable: safe only on a single-tenant machine.

HW1_SANDBOX_DISABLE (staff and tests only; Gradescope never sets it) may turn off an
`if_available` defence, e.g. "namespaces,tmpfs" for the set-up of a Docker container; it can
never turn off a required one.
"""

import errno
import os

from autograder.sandbox import cgroups, seccomp, wall

NAMES = ('user', 'seccomp', 'namespaces', 'cgroups', 'landlock')
LEVELS = ('required', 'if_available', 'off')
ALIASES = {'tmpfs': 'namespaces', 'filesystem': 'namespaces'}   # older names of HW1_SANDBOX_DISABLE
NAMESPACE_FILES = ('mnt', 'pid', 'net', 'ipc', 'uts')


LANDLOCK_MISSING = {errno.ENOSYS: 'the kernel has no Landlock (before 5.13, or not built in)',
                    errno.EOPNOTSUPP: 'Landlock is built in but off (not in the kernel\'s lsm= list)',
                    errno.EPERM: 'the container\'s seccomp profile denies Landlock\'s calls'}
SINGLE_TENANT = ('NOT a wall: neither namespaces nor Landlock, so a probe may open whatever the sandbox user can read '
                 'on this machine; a search for copies of the grader (copies.py) refuses a grading while one it finds '
                 'is readable, but a file it does not recognise stays readable: safe only on a single-tenant machine '
                 '(one grading per container, nothing else of the course on it, as on Gradescope)')


class SandboxRefused(RuntimeError):
    """A defence the grading needs is missing or failed: no student code runs. The message is for staff."""


def capabilities(pool_note):
    """{defence: True, or why this machine cannot give it}, from privileges alone (nothing is tried here)."""
    caps = {'user': True if pool_note is None else pool_note,
            'seccomp': True if seccomp.program() is not None else 'no seccomp filter is defined for %s'
            % os.uname().machine}
    abi = wall.landlock_abi()
    caps['landlock'] = True if abi >= 1 else LANDLOCK_MISSING.get(-abi, 'landlock_create_ruleset failed: %s'
                                                                % os.strerror(-abi))
    if os.geteuid() != 0:
        caps['namespaces'] = caps['cgroups'] = 'the grader is not root'
        return caps
    missing = [n for n in NAMESPACE_FILES if not os.path.exists('/proc/self/ns/' + n)]
    if missing:
        caps['namespaces'] = 'the kernel has no %s namespaces' % ', '.join(missing)
    elif not wall.has_cap_sys_admin():
        caps['namespaces'] = 'no CAP_SYS_ADMIN (a default Docker container, as on Gradescope)'
    else:
        caps['namespaces'] = True
    caps['cgroups'] = cgroups.available()
    return caps


def disabled_by_env():
    names = {ALIASES.get(n.strip(), n.strip()) for n in os.environ.get('HW1_SANDBOX_DISABLE', '').split(',')}
    return names - {''}


def plan(levels, caps):
    """
    {defence: (in force?, why)} for this grading; SandboxRefused when a required defence is missing.
    `levels`: grading.yaml's sandbox.defences; `caps`: capabilities().
    """
    unknown = disabled_by_env() - set(NAMES)
    if unknown:
        raise SandboxRefused('HW1_SANDBOX_DISABLE names %s; it may name %s' % (', '.join(sorted(unknown)),
                                                                               ', '.join(NAMES)))
    out = {}
    for name in NAMES:
        level = levels.get(name, 'required')
        if name in disabled_by_env():
            if level == 'required':
                raise SandboxRefused('HW1_SANDBOX_DISABLE turns off %s, which grading.yaml requires' % name)
            out[name] = (False, 'turned off by HW1_SANDBOX_DISABLE')
        elif level == 'off':
            out[name] = (False, 'off in grading.yaml (sandbox.defences.%s)' % name)
        elif caps[name] is True:
            out[name] = (True, 'in force')
        elif level == 'required':
            raise SandboxRefused('grading.yaml requires the %s defence, which this machine cannot give: %s. Student '
                                 'code was not run. Fix the machine (./setup.sh as root), or choose a weaker mode '
                                 'in grading.yaml sandbox.defences.' % (name, caps[name]))
        else:
            out[name] = (False, caps[name])
    if out['namespaces'][0] and not out['user'][0]:
        out['namespaces'] = (False, 'namespaces are used only together with the sandbox user')
    if out['namespaces'][0] and out['landlock'][0]:
        out['landlock'] = (False, NOT_NEEDED)
    return out


NOT_NEEDED = 'not used: with namespaces the allow-listed root is the wall'


def describe(plan_, landed=None):
    """What was in force, in words, for results.json's extra_data.isolation (staff only) and the CLI."""
    on = {n: plan_[n][0] for n in NAMES}
    ns, user, landlock = on['namespaces'], on['user'], on['landlock']
    lacks = ['%s: %s' % (n, plan_[n][1]) for n in NAMES if not on[n] and plan_[n][1] != NOT_NEEDED]
    out = {
        'network': ' + '.join(x for x, ok in (('seccomp: socket() denied', on['seccomp']),
                                              ('own network namespace', ns)) if ok)
        or 'NOT isolated (%s; %s)' % (plan_['seccomp'][1], plan_['namespaces'][1]),
        'proc': 'own PID namespace and /proc: other processes invisible' if ns
                else 'NOT hidden: /proc shows other processes (%s)' % plan_['namespaces'][1],
        'filesystem': ('allow-listed root: the interpreter and system libraries read-only, the probe\'s own '
                       'inputs read-only, out/ and home/ (= /tmp) writable size-limited tmpfs; nothing else' if ns
                       else 'Landlock allow-list: the interpreter and system libraries, the grading\'s code and the '
                            'probe\'s own inputs read-only, its out/ and home/ (= TMPDIR) writable; nothing else can '
                            'be opened (the shared /tmp, /var/tmp and /dev/shm and every other copy of the grader '
                            'included)' if landlock
                       else 'the whole machine as the sandbox user sees it: the grader\'s folders are root-only, and '
                            'the files the user leaves in any writable folder are removed' if user
                       else 'the whole machine as the grader\'s own user'),
        'tmp': ("/tmp is the probe's own size-limited tmpfs" if ns
                else 'shared /tmp, /var/tmp and /dev/shm out of reach (Landlock): the probe writes only its own out/ '
                     'and home/ (= TMPDIR); what the sandbox user owns elsewhere is still deleted after each probe'
                if landlock
                else 'shared /tmp and every other writable folder: the sandbox user\'s files are deleted after each '
                     'probe'),
        'processes': ('one fresh process per probe from an imported interpreter (zygote), every process of the '
                      'sandbox user and of the grading cgroup killed and confirmed gone between probes'),
        'cpu': ('deadlines count the CPU time of the grading cgroup; equal CPU share, memory and task limits'
                if on['cgroups'] else 'deadlines count the CPU time of the sandbox user\'s processes (/proc); no '
                                      'CPU share or memory limit of its own (%s)' % plan_['cgroups'][1]),
        'lacks': lacks,
    }
    if not ns and not landlock:   # with or without a sandbox user: said plainly wherever it is read
        out['wall'] = SINGLE_TENANT
    for n in NAMES:
        out[n] = True if on[n] else plan_[n][1]
    out['tmpfs'] = out['namespaces']   # one privilege gives both: the older name, kept for readers of extra_data
    if landed:
        out.update(landed)
    return out
