"""
One cgroup per grading, where the machine lets the grader make one (root outside a default
Docker container; Gradescope mounts /sys/fs/cgroup read-only): every probe process joins it
first thing (wall.py), so everything it starts stays inside, and the harness

- counts the CPU time of all of them (deadlines are CPU seconds, not gaps between lines);
- gives each grading an equal CPU share next to a concurrent one (cpu.shares / cpu.weight);
- caps its memory and its number of tasks (memory.limit / memory.max, pids.max);
- knows an OOM kill from its counter (memory.oom_control / memory.events: oom_kill), so that it
  is reported as "out of memory", never as a timeout;
- kills every process in it and confirms the cgroup is empty (cgroup.kill, else the freezer).

cgroup v2 (unified) and v1 are both handled, also mixed: a v1 controller is used for what the v2
hierarchy lacks. Names are unique per grading (hw1-<grader pid>-<random>), made under the
grader's own cgroup of each hierarchy; stale ones of dead graders are removed by sweep_stale().
"""

import os
import secrets
import signal
import time

PREFIX = 'hw1-'
V1_CONTROLLERS = ('cpu', 'cpuacct', 'memory', 'pids', 'freezer')


def _read(path, default=''):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def _write(path, value):
    with open(path, 'w') as f:
        f.write(str(value))


def _pairs(text):
    return {k: v for k, _, v in (line.partition(' ') for line in text.splitlines())}


def hierarchies():
    """{'v2': base folder or None, 'v1': {controller: base folder}}: the grader's own cgroup folders, writable ones
    only."""
    own = {}
    for line in _read('/proc/self/cgroup').splitlines():
        _, controllers, path = line.split(':', 2)
        for c in controllers.split(',') if controllers else ['']:
            own[c] = path
    found = {'v2': None, 'v1': {}}
    for line in _read('/proc/self/mountinfo').splitlines():
        left, _, right = line.partition(' - ')
        fields, rfields = left.split(), right.split()
        if len(fields) < 6 or len(rfields) < 3:
            continue
        root, point, options, fstype, super_options = fields[3], fields[4], fields[5], rfields[0], rfields[2]
        if 'ro' in options.split(','):
            continue

        def base(path):
            rel = os.path.relpath(path, root) if path.startswith(root) else None
            return None if rel is None or rel.startswith('..') else os.path.normpath(os.path.join(point, rel))
        if fstype == 'cgroup2' and '' in own and found['v2'] is None:
            found['v2'] = base(own[''])
        elif fstype == 'cgroup':
            for c in set(super_options.split(',')) & set(V1_CONTROLLERS):
                if c in own and c not in found['v1']:
                    found['v1'][c] = base(own[c])
    found['v1'] = {c: b for c, b in found['v1'].items() if b and os.access(b, os.W_OK)}
    if found['v2'] and not os.access(found['v2'], os.W_OK):
        found['v2'] = None
    return found


def available():
    """True, or why no grading cgroup can be made here: CPU accounting and a way to kill are the least it must give."""
    h = hierarchies()
    if h['v2'] or 'cpuacct' in h['v1'] or ('cpu' in h['v1'] and 'freezer' in h['v1']):
        return True
    return ('no writable cgroup hierarchy (/sys/fs/cgroup is read-only or absent, as in a default Docker '
            'container)')


class Cgroup:
    """The cgroup of one grading. `limits`: memory_mb, pids (None: not limited)."""

    def __init__(self, memory_mb=None, pids=None):
        self.name = '%s%d-%s' % (PREFIX, os.getpid(), secrets.token_hex(4))
        h = hierarchies()
        self.dirs = {}                       # hierarchy key ('v2' or a v1 controller) -> folder
        self.v2_controllers = set()
        if h['v2']:
            path = os.path.join(h['v2'], self.name)
            os.mkdir(path)
            self.dirs['v2'] = path
            self.v2_controllers = set(_read(os.path.join(path, 'cgroup.controllers')).split())
        for c, base in sorted(h['v1'].items()):
            if c in ('cpu', 'memory', 'pids') and c in self.v2_controllers:
                continue   # the unified hierarchy has it
            path = os.path.join(base, self.name)
            if not os.path.isdir(path):   # co-mounted controllers (cpu,cpuacct) share one folder
                os.mkdir(path)
            self.dirs[c] = path
        self.limits = {}
        self._limit(memory_mb, pids)

    def _limit(self, memory_mb, pids):
        if memory_mb and 'memory' in self.v2_controllers:
            _write(os.path.join(self.dirs['v2'], 'memory.max'), memory_mb << 20)
            if os.path.exists(os.path.join(self.dirs['v2'], 'memory.swap.max')):
                _write(os.path.join(self.dirs['v2'], 'memory.swap.max'), 0)
            self.limits['memory_mb'] = memory_mb
        elif memory_mb and 'memory' in self.dirs:
            d = self.dirs['memory']
            _write(os.path.join(d, 'memory.limit_in_bytes'), memory_mb << 20)
            if os.path.exists(os.path.join(d, 'memory.memsw.limit_in_bytes')):   # no escape into swap
                _write(os.path.join(d, 'memory.memsw.limit_in_bytes'), memory_mb << 20)
            self.limits['memory_mb'] = memory_mb
        d = self.dirs['v2'] if 'pids' in self.v2_controllers else self.dirs.get('pids')
        if pids and d:
            _write(os.path.join(d, 'pids.max'), pids)
            self.limits['pids'] = pids
        # an equal CPU share: every grading cgroup gets the default weight, whatever its number of processes
        if 'cpu' in self.v2_controllers:
            _write(os.path.join(self.dirs['v2'], 'cpu.weight'), 100)
            self.limits['cpu_share'] = 'cpu.weight 100'
        elif 'cpu' in self.dirs:
            _write(os.path.join(self.dirs['cpu'], 'cpu.shares'), 1024)
            self.limits['cpu_share'] = 'cpu.shares 1024'

    def procs_files(self):
        """The cgroup.procs files a probe process writes itself into (wall.py)."""
        return [os.path.join(d, 'cgroup.procs') for d in dict.fromkeys(self.dirs.values())]

    def contains(self, pid):
        """Whether process `pid` is in this cgroup in every hierarchy used (read from outside, by the harness)."""
        where = {}
        for line in _read('/proc/%d/cgroup' % pid).splitlines():
            _, controllers, path = line.split(':', 2)
            for c in controllers.split(',') if controllers else ['v2']:
                where[c] = path
        return bool(where) and all(where.get(k, '').endswith('/' + self.name) for k in self.dirs)

    # ------------------------------------------------------------------ figures
    def cpu_seconds(self):
        if 'cpuacct' in self.dirs:
            return int(_read(os.path.join(self.dirs['cpuacct'], 'cpuacct.usage'), '0') or 0) / 1e9
        if 'v2' in self.dirs:
            return int(_pairs(_read(os.path.join(self.dirs['v2'], 'cpu.stat'))).get('usage_usec', 0)) / 1e6
        return None

    def memory_peak(self):
        """Bytes, the high-water mark since the last reset_peak(), or None."""
        if 'memory' in self.v2_controllers:
            text = _read(os.path.join(self.dirs['v2'], 'memory.peak')).strip()
            return int(text) if text.isdigit() else None
        if 'memory' in self.dirs:
            text = _read(os.path.join(self.dirs['memory'], 'memory.max_usage_in_bytes')).strip()
            return int(text) if text.isdigit() else None
        return None

    def reset_peak(self):
        try:
            if 'memory' in self.v2_controllers:
                _write(os.path.join(self.dirs['v2'], 'memory.peak'), 0)   # kernels >= 6.12; older keep the max
            elif 'memory' in self.dirs:
                _write(os.path.join(self.dirs['memory'], 'memory.max_usage_in_bytes'), 0)
        except OSError:
            pass

    def oom_kills(self):
        if 'memory' in self.v2_controllers:
            return int(_pairs(_read(os.path.join(self.dirs['v2'], 'memory.events'))).get('oom_kill', 0))
        if 'memory' in self.dirs:
            return int(_pairs(_read(os.path.join(self.dirs['memory'], 'memory.oom_control'))).get('oom_kill', 0))
        return None

    def pids(self):
        out = set()
        for procs in self.procs_files():
            out.update(int(p) for p in _read(procs).split())
        return out

    # ------------------------------------------------------------------ the end
    def kill(self):
        """SIGKILL to every process in the cgroup, atomically where the kernel can (cgroup.kill, else frozen first)."""
        kill_file = os.path.join(self.dirs.get('v2', ''), 'cgroup.kill')
        if 'v2' in self.dirs and os.path.exists(kill_file):
            _write(kill_file, 1)
            return
        freezer = os.path.join(self.dirs['freezer'], 'freezer.state') if 'freezer' in self.dirs else None
        if freezer:
            _write(freezer, 'FROZEN')   # nothing forks while the list is read
            for _ in range(100):
                if _read(freezer).strip() == 'FROZEN':
                    break
                time.sleep(0.01)
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if freezer:
            _write(freezer, 'THAWED')   # killed processes die once thawed

    def remove(self):
        for d in reversed(list(dict.fromkeys(self.dirs.values()))):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def sweep_stale():
    """Remove the grading cgroups of graders that no longer run (killed by a watchdog); returns how many."""
    h = hierarchies()
    removed = 0
    for base in [h['v2']] + list(h['v1'].values()):
        if not base or not os.path.isdir(base):
            continue
        for name in os.listdir(base):
            if not name.startswith(PREFIX):
                continue
            owner = name[len(PREFIX):].split('-')[0]
            if owner.isdigit() and os.path.exists('/proc/%s' % owner):
                continue
            path = os.path.join(base, name)
            for pid in _read(os.path.join(path, 'cgroup.procs')).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
            for _ in range(50):
                try:
                    os.rmdir(path)
                    removed += 1
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
    return removed


class Meter:
    """The grading cgroup's CPU counter since this probe began: every process in it, whoever reaps it."""

    def __init__(self, cgroup):
        self.cgroup = cgroup
        self.start = cgroup.cpu_seconds() if cgroup is not None else 0.0

    def sample(self):
        return self.cgroup.cpu_seconds() - self.start if self.cgroup is not None else 0.0

    def reaped(self, pid, seconds):
        pass   # already in the counter
