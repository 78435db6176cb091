"""
Issue 40, items 3 and 5: a hang is a hang however it grows, and every service the child can ask is capped.

- A probe process whose own memory grows past sandbox.probe_memory_mb is stopped by the harness (sandbox/probe.py)
  like one past its CPU deadline: ended 'memory', its stack asked for, status 'timeout' (ProbeResult.hung), worded
  with the limit and charged by set_aside.py as a hang.
- A process that exits without results is told its code may have called sys.exit or os._exit only where model.py
  names such a call (submission.names_exit: the harness's own reading of the source).
- The grader's RoPE (judge/rope_service.py) answers at most a Cap of calls and MB per probe process; past it the
  process is stopped, unanswered, and the fact counts what it asked, no entry per call.
"""

import ast
import os
import time

from autograder.judge import config, messages, probe_job, rope_service, submission
from autograder.contract import rope_link
from autograder.sandbox import LinkAnswer, ProbeResult, Settings
from autograder.sandbox import probe

SETTINGS = Settings.from_mapping(config.load().sandbox)


def watch(pid=4242):
    """A probe's watch as the harness holds it, its process already walled in (no real process behind it)."""
    killed = []
    w = probe._Watch(None, None, pid, True, lambda pid: None, killed.append, None)
    w.ready, w.started = True, time.time()
    return w, killed


# ----------------------------------------------------------------------------- memory: a hang that allocates

def test_memory_of_a_process_is_its_anonymous_and_shared_pages():
    here = probe.memory_of(os.getpid())
    hog = bytearray(64 << 20)   # 64 MB, touched
    hog[::4096] = b'x' * len(hog[::4096])
    assert probe.memory_of(os.getpid()) - here >= 60 << 20
    assert probe.memory_of(2 ** 22 + 12345) is None   # no such process: nothing read, never an error
    del hog


def test_a_process_past_its_memory_cap_is_stopped_like_a_hang():
    w, killed = watch()
    limits = probe.Deadlines(cpu_limit=60, wall_limit=200, budget_end=time.time() + 600, memory_bytes=320 << 20)
    w.check_time(1.0, limits, w.started, memory=300 << 20)
    assert w.out['ended'] is None   # under its cap: runs on
    w.check_time(1.2, limits, w.started, memory=330 << 20)
    assert w.out['ended'] == 'memory' and w.out['memory_limit_bytes'] == 320 << 20
    assert w.out['memory_bytes'] == 330 << 20 and killed == [4242]   # no dump path here: killed at once
    assert 'memory' in probe.HUNG
    no_cap = probe.Deadlines(cpu_limit=60, wall_limit=200, budget_end=time.time() + 600)
    w, killed = watch()
    w.check_time(1.0, no_cap, w.started, memory=10 << 30)
    assert w.out['ended'] is None and killed == []


def test_a_memory_stop_is_worded_with_its_limit_and_names_no_other_cause():
    h = {'ended': 'memory', 'memory_limit_bytes': 320 << 20, 'memory_bytes': 333 << 20, 'cpu_seconds': 4.26,
         'cpu_limit': 60, 'signal': 'SIGKILL', 'exit_code': None}
    text = probe_job.ending_message('gqa', h, SETTINGS)
    assert text == ("its memory kept growing past the 320 MB a test's process may use (333 MB of its own after "
                    "4.3 s of CPU time: a loop that never ends, allocating as it goes?) and it was stopped")
    assert 'out of memory' not in text and 'sys.exit' not in text
    assert probe_job.ending_message('import', h, SETTINGS).startswith('importing your model.py did not finish: ')


def test_a_hung_result_is_one_status_whatever_stopped_it():
    assert ProbeResult('timeout', unread=True, harness={'ended': 'memory'}).hung
    assert ProbeResult('timeout', unread=True, harness={'ended': 'timeout'}).hung
    assert not ProbeResult('crashed', unread=True, harness={'ended': 'oom'}).hung


def test_the_probe_memory_cap_sits_under_the_kernels_limits():
    sandbox = config.load().sandbox
    assert 0 < sandbox['probe_memory_mb'] < sandbox['cgroup_memory_mb'] < sandbox['address_space_mb']
    assert SETTINGS.probe_memory_mb == sandbox['probe_memory_mb']


# ----------------------------------------------------------------------------- exit words only where the code exits

def names_exit(code):
    return submission.names_exit(ast.parse(code))


def test_exit_is_named_only_where_the_source_names_it():
    assert names_exit('import sys\nsys.exit(0)\n') and names_exit('import os\nos._exit(3)\n')
    assert names_exit('from sys import exit as leave\n') and names_exit('raise SystemExit(1)\n')
    assert names_exit('quit()\n') and names_exit('exit()\n')
    assert not names_exit('kv_of = []\nh = 0\nwhile h < 6:\n    kv_of.append(h // 2)\n')
    assert not submission.names_exit(None)
    with open(os.path.join(os.path.dirname(__file__), '..', '..', 'reference', 'mingpt', 'model.py')) as f:
        assert not names_exit(f.read())


def test_an_exit_code_blames_sys_exit_only_where_the_code_has_it():
    h = {'ended': 'exit', 'exit_code': 1, 'signal': None, 'cpu_limit': 5, 'wall_seconds': 3}
    assert probe_job.ending_message('gqa', h, SETTINGS, exits=False) == (
        'its process ended without leaving results: the process exited with code 1')
    assert probe_job.ending_message('gqa', h, SETTINGS, exits=True) == (
        'its process ended without leaving results: the process exited with code 1 (sys.exit or os._exit in '
        'your code?)')


# ----------------------------------------------------------------------------- the grader's RoPE: capped

def request(rows=1, length=4, d=8):
    return rope_link.encode(b'f', 0, rows, length, d, 10000.0, b'f', b'\0' * (rows * length * d * 4))


def test_the_rope_service_answers_up_to_the_gradings_budget_then_stops_the_process():
    budget = rope_service.Budget(calls=3, mb=1)
    first, second = rope_service.for_probe(budget), rope_service.for_probe(budget)   # two probes, one grading
    answered = [first(request(), 7), first(request(), 7), second(request(), 8)]
    assert all(isinstance(a, tuple) and len(a[0]) == 4 * 8 * 4 and a[1]['kind'] == 'rope' for a in answered)
    past = second(request(), 8)
    assert isinstance(past, LinkAnswer) and past.reply == b'' and past.log == ()
    assert past.stop == {'kind': 'rope_cap', 'calls': 4, 'cap_calls': 3, 'mb': 0.0, 'cap_mb': 1}
    assert isinstance(first(request(), 7), LinkAnswer)   # spent for every probe of the grading
    # values: 1 MB in all, whatever the number of calls
    service = rope_service.for_probe(rope_service.Budget(calls=1000, mb=1))
    big = request(rows=60, length=30, d=8)   # ~57 KB
    answers = [service(big, 7) for _ in range(20)]
    stopped = [i for i, a in enumerate(answers) if isinstance(a, LinkAnswer)]
    assert stopped and stopped[0] == (1 << 20) // len(big) and answers[stopped[0]].stop['kind'] == 'rope_cap'


def test_past_the_logged_calls_a_probe_keeps_one_entry_of_counts():
    budget = rope_service.Budget(calls=100, mb=64, logged=5)
    service, log = rope_service.for_probe(budget), []
    for _ in range(30):
        reply, entry = service(request(), 7)
        assert len(reply) == 4 * 8 * 4   # still answered: only the log is counts
        if entry is not None:
            log.append(entry)
    assert len(log) == 6 and log[-1] == {'kind': 'rope', 'unlogged_calls': 25, 'bytes': 25 * len(request())}
    assert rope_service.calls_of(log) == 30 and rope_service.mb_of(log) == round(30 * len(request()) / 2 ** 20, 2)


def test_the_caps_are_grading_yamls_per_profile():
    sandbox = config.load().sandbox
    assert set(sandbox['rope_service_calls']) == set(sandbox['rope_service_mb']) == set(config.load().profiles)
    assert all(v > 0 for v in sandbox['rope_service_calls'].values())


def test_a_stop_answer_stops_the_process_unanswered_with_its_fact():
    w, killed = watch()
    w.link_open = True
    w.replies = []
    sent = []
    w._reply = sent.append
    asks = w._serve(b'\x01' + request(), 4242, 0)
    assert isinstance(next(asks), probe.LinkRequest)
    fact = {'kind': 'rope_cap', 'calls': 20001, 'cap_calls': 20000, 'mb': 1.2, 'cap_mb': 512}
    try:
        asks.send(LinkAnswer(stop=fact))
    except StopIteration:
        pass
    assert w.out['ended'] == 'link' and w.out['link_errors'] == [fact] and sent == [] and killed == [4242]
    words = messages.process_ended(dict(w.out, cpu_limit=60, wall_seconds=1), 420, 512)
    assert words == ("it was stopped: your code asked the grader's RoPE for more than a grading needs (20001 calls "
                     "and 1.2 MB of values; a grading gets at most 20000 calls and 512 MB) and got no more answers")


def test_a_service_may_answer_with_its_own_link_answer():
    stop = LinkAnswer(stop={'kind': 'rope_cap'})
    assert probe_job._answer(lambda payload, pid: stop, probe.LinkRequest(b'x', 1)) is stop
