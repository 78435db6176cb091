"""
The suite's store of gradings (tests/helpers/grading_store.py) and the grading log (autograder/judge/grading_log.py),
without grading anything: a grading asked for by two processes at once is made once and read by both; one that fails
(or that the grader could not make: a refused sandbox) is not kept; any change of the upload, the mode or the grader
is a new key. The log writes one line per grading only where HW1_GRADING_LOG says so, and hashes an upload as it
lies (a link is never followed).
"""

import hashlib
import json
import os
import time

import grading_store
import pytest

from autograder.judge import grading_log


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(grading_store, 'ROOT', str(tmp_path / 'store'))
    monkeypatch.setattr(grading_store, '_MEMORY', {})
    return tmp_path


def test_a_grading_asked_by_two_processes_at_once_is_made_once(store):
    made = store / 'made'

    def produce():
        with open(str(made), 'a') as f:
            f.write('x')
        time.sleep(0.3)   # the other process asks meanwhile: it must wait, not grade again
        return {'results': 'graded'}
    pids = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            try:
                grading_store._MEMORY.clear()
                value, _ = grading_store.ask('model.py text', {'route': 'test'}, produce)
                os._exit(0 if value == {'results': 'graded'} else 1)
            except BaseException:
                os._exit(2)
        pids.append(pid)
    assert [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids] == [0, 0]
    assert grading_store.ask('model.py text', {'route': 'test'}, produce) == ({'results': 'graded'}, False)
    assert made.read_text() == 'x'


def test_a_failed_grading_is_not_kept_and_any_change_is_a_new_key(store, monkeypatch):
    def fails():
        raise AssertionError('the grading failed')
    with pytest.raises(AssertionError):
        grading_store.ask('text', {'m': 1}, fails)
    assert grading_store.ask('text', {'m': 1}, lambda: {'results': 'ok'}) == ({'results': 'ok'}, True)
    keys = {grading_store.key_of('text', {'m': 1}), grading_store.key_of('text ', {'m': 1}),
            grading_store.key_of('text', {'m': 2}), grading_store.key_of(b'text', {'m': 1, 'skip': []})}
    assert len(keys) == 4
    monkeypatch.setattr(grading_store, '_GRADER', ['another grader'])
    assert grading_store.key_of('text', {'m': 1}) not in keys


def test_the_graders_own_error_is_not_kept(store):
    refused = {'results': json.dumps({'tests': [], 'extra_data': {'grader_error': 'sandbox refused: ...'}})}
    graded = {'results': json.dumps({'tests': [], 'extra_data': {'isolation': {}}})}
    made = []
    for value in (refused, graded, graded):
        got, fresh = grading_store.ask('text', {'m': 1}, lambda: made.append(1) or value,
                                       grading_store.graded_by_the_grader)
        assert got == (refused if len(made) == 1 else graded)
    assert len(made) == 2 and not fresh   # the refusal was graded again, the grading then read


def test_the_grader_hash_covers_the_fixtures_and_grading_yaml(monkeypatch):
    monkeypatch.setattr(grading_store, '_GRADER', [])
    assert {'autograder', 'reference', 'grading.yaml', 'run_autograder'} <= set(grading_store.GRADER_PARTS)
    assert len(grading_store.grader_sha256()) == 64


def test_the_grading_log_writes_a_line_only_when_asked(tmp_path, monkeypatch):
    model = tmp_path / 'model.py'
    model.write_text('import torch\n')
    log = tmp_path / 'log.jsonl'
    monkeypatch.delenv(grading_log.ENV, raising=False)
    grading_log.record(str(model), 'cpu', str(model), (), None, False, 1.0)
    assert not log.exists()
    monkeypatch.setenv(grading_log.ENV, str(log))
    monkeypatch.setenv('HW1_SANDBOX_DISABLE', 'namespaces,cgroups')
    grading_log.record(str(model), 'cpu', str(model), ('loss-curve',), '/autograder', False, 1.234)
    line = json.loads(log.read_text())
    assert line['upload'] == hashlib.sha256(b'import torch\n').hexdigest()
    assert (line['skip'], line['disable'], line['autograder_root'], line['batch'], line['seconds']) == \
        (['loss-curve'], 'namespaces,cgroups', True, False, 1.23)


def test_the_grading_log_hashes_a_folder_as_it_lies(tmp_path):
    up = tmp_path / 'up'
    (up / 'mingpt').mkdir(parents=True)
    (up / 'mingpt' / 'model.py').write_text('x = 1\n')
    secret = tmp_path / 'secret.py'
    secret.write_text('never read\n')
    os.symlink(str(secret), str(up / 'link.py'))
    first = grading_log.upload_sha256(str(up))
    secret.write_text('changed, still never read\n')
    assert grading_log.upload_sha256(str(up)) == first   # the link's target, not its content
    (up / 'mingpt' / 'model.py').write_text('x = 2\n')
    assert grading_log.upload_sha256(str(up)) != first
    assert grading_log.upload_sha256(str(tmp_path / 'missing')) is None
    os.unlink(str(up / 'link.py'))   # one file alone: the same upload as that file given as a path
    assert grading_log.upload_sha256(str(up)) == grading_log.upload_sha256(str(up / 'mingpt' / 'model.py')) == \
        hashlib.sha256(b'x = 2\n').hexdigest()
