"""
The sandbox's settings, typed: what the caller (grade.py, the batch engine, tests) gives Sandbox.
The sandbox package never reads grading.yaml itself; `Settings.from_mapping(grading.sandbox)` turns
that section (a dict) into this: a missing key is an error; keys of the section that are not the
sandbox's (the grader's own) are left out. grading.yaml's comments say why each value is what it is.
"""

from dataclasses import dataclass, field, fields
from typing import Dict, Optional


@dataclass(frozen=True)
class Settings:
    user: str                      # the pool's first sandbox user (the others: user1, user2, ...)
    pool_size: int                 # sandbox users in the pool: concurrent gradings
    address_space_mb: int          # RLIMIT_AS of a probe process
    cpu_seconds: int               # RLIMIT_CPU of a probe process, at most
    total_seconds: float           # every process of one grading together (the grading budget)
    max_processes: int             # RLIMIT_NPROC of the sandbox user
    max_file_mb: int               # RLIMIT_FSIZE, and the largest array file read back
    max_json_kb: int               # the largest report read back
    scratch_mb: int                # each tmpfs writable folder of a probe (with namespaces)
    scratch_inodes: int            # files in each
    cgroup_memory_mb: int          # memory of a grading's processes (with cgroups)
    wall_factor: float             # wall-clock cap = wall_factor x CPU timeout + 10 s
    idle_seconds: Optional[float] = None   # a process with almost no CPU over this much wall time is stopped
    probe_memory_mb: Optional[int] = None  # a probe process holding more of its own memory is stopped as a hang
    defences: Dict[str, str] = field(default_factory=dict)   # defence -> required | if_available | off
    python_copy: Optional[str] = None   # the interpreter's copy the sandbox user runs (pyenv under /root)
    max_output_chars: int = 4000   # (the grader's; carried, unused here)
    watchdog_seconds: float = 570  # (run_autograder's; carried, unused here)

    @classmethod
    def from_mapping(cls, values):
        """From grading.yaml's `sandbox:` section (or a Settings, returned as it is)."""
        if isinstance(values, cls):
            return values
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in dict(values).items() if k in known})

    def __getitem__(self, name):
        """settings['name'] as well as settings.name: callers that still hold the dict's habits."""
        return getattr(self, name)
