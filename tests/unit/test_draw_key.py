"""
The draw key's life cycle (autograder/judge/fixtures.py): the committed fixtures are made with the
public test key and no key is committed; a course's key is made by `regenerate --course` in course/
(git-ignored, owner-only), kept across runs, and once there it is the only key this checkout grades
with; fixtures whose key is not the one in place are refused. build-zip's refusal of the public key
is tests/e2e/test_build_zip.py's.
"""

import hashlib
import json
import os
import stat
import subprocess

import pytest

from autograder import FIXTURES_DIR, REPO_ROOT
from autograder.judge import config, fixtures

GRADING = config.load()


def _git(*args):
    return subprocess.run(['git'] + list(args), cwd=REPO_ROOT, capture_output=True, text=True)


def test_the_committed_key_is_the_public_test_key():
    tracked = _git('ls-files').stdout.split()
    assert not [f for f in tracked if f.endswith('.key') or os.path.basename(f) == fixtures.KEY_FILE]
    assert fixtures.PUBLIC_TEST_KEY == b'hw1 PUBLIC TEST KEY, not secret!' and len(fixtures.PUBLIC_TEST_KEY) == 32
    assert fixtures.read_key(FIXTURES_DIR) == fixtures.PUBLIC_TEST_KEY   # no key file: the public one
    with open(os.path.join(FIXTURES_DIR, 'cpu', 'manifest.json')) as f:
        manifest = json.load(f)
    assert manifest['draw_key'].startswith('public test key')
    assert manifest['draw_key_sha256'] == hashlib.sha256(fixtures.PUBLIC_TEST_KEY).hexdigest()
    assert fixtures.staleness(GRADING, 'cpu', manifest, FIXTURES_DIR) == []


def test_a_course_key_or_its_fixtures_are_never_committed():
    for path in ('course/draw.key', 'course/cpu/expected.npz', 'autograder/fixtures/draw.key',
                 'autograder/fixtures/cpu/draw.key'):
        assert _git('check-ignore', '-q', path).returncode == 0, path


@pytest.fixture
def course(tmp_path, monkeypatch):
    path = tmp_path / 'course'
    monkeypatch.setattr(fixtures, 'COURSE_DIR', str(path))
    return path


def test_regenerate_course_makes_a_key_once_owner_only_and_keeps_it(course):
    assert fixtures.root() == FIXTURES_DIR
    key = fixtures.make_course_key()
    assert len(key) == 32 and key != fixtures.PUBLIC_TEST_KEY
    assert stat.S_IMODE(os.stat(course).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(course / fixtures.KEY_FILE).st_mode) == 0o600
    assert fixtures.make_course_key() == key == fixtures.read_key()   # kept: a regrade draws the same sets
    assert fixtures.root() == str(course)   # from now on the checkout grades with the course's key only


def test_a_course_key_without_its_fixtures_grades_nothing(course):
    fixtures.make_course_key()
    with pytest.raises(fixtures.StaleFixtures) as refused:
        fixtures.load(GRADING, 'cpu')
    assert 'python -m autograder regenerate --course' in str(refused.value)


def test_fixtures_of_another_key_are_stale(course):
    """The committed fixtures under a course's key: every set's inputs would differ from those they were made with."""
    fixtures.make_course_key()
    for name in ('expected.npz', 'known_bugs.npz', 'manifest.json'):
        os.makedirs(course / 'cpu', exist_ok=True)
        with open(os.path.join(FIXTURES_DIR, 'cpu', name), 'rb') as src, open(course / 'cpu' / name, 'wb') as dst:
            dst.write(src.read())
    with pytest.raises(fixtures.StaleFixtures) as refused:
        fixtures.load(GRADING, 'cpu')
    assert 'draw key' in str(refused.value) and 'regenerate --course' in str(refused.value)
    (course / fixtures.KEY_FILE).write_text('not hex\n')
    assert fixtures.read_key() == b'' and fixtures.staleness(GRADING, 'cpu', {}, str(course))
    with pytest.raises(fixtures.StaleFixtures):
        fixtures.make_course_key()   # an unreadable key is never replaced silently: the draws would change
