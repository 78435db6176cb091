"""
Reading a Gradescope export (autograder/staff/regrade/gradescope_export.py) and batch's resume stamps, without
grading anything: the three forms a TA hands over (zip, outer folder, inner folder) find the
same export; the Ruby-symbol metadata is read with accents, groups and odd SIDs; bad YAML is
one sentence; entries without a folder are reported; a stamp changes with the submission's
content and the grader's code.
"""

import json
import os

import pytest
import synthetic_export

from autograder.staff.regrade import batch, gradescope_export


def test_zip_outer_and_inner_folder_are_the_same_export(tmp_path):
    inner = synthetic_export.build(tmp_path / 'unzipped')
    os.makedirs(tmp_path / 'dl')
    zip_path = synthetic_export.build_zip(tmp_path / 'dl' / 'assignment_4242_export.zip')
    forms = [gradescope_export.read(inner), gradescope_export.read(str(tmp_path / 'unzipped')),
             gradescope_export.read(zip_path)]
    assert forms[0].folder == forms[1].folder == inner
    assert forms[2].folder == str(tmp_path / 'dl' / 'assignment_4242_export' / synthetic_export.ASSIGNMENT)
    for ex in forms:
        assert ex.submissions == sorted(s for s, t in synthetic_export.TOTALS.items() if t is not None)
        assert ex.missing == ['submission_1000006'] and ex.unlisted == [] and ex.duplicates == {}
    assert gradescope_export.read(zip_path).folder == forms[2].folder      # unpacked once, reused
    with open(os.path.join(forms[2].folder, 'submission_1000001', 'model.py'), 'rb') as f:
        assert f.read() == synthetic_export.files()['submission_1000001/model.py']


def test_metadata_with_ruby_symbols_accents_groups_and_odd_sids():
    meta = gradescope_export.parse_metadata(synthetic_export.METADATA)
    assert sorted(meta) == sorted(synthetic_export.TOTALS)
    people = {p.name: p for e in meta.values() for p in e.submitters}
    assert people['Zoë Ångström-Núñez'].sid == '' and people['Zoë Ångström-Núñez'].email == 'zoe.angstrom@example.edu'
    assert people['Bob Placeholder'].sid == '900000002'     # an int in the YAML
    assert people['Dan Dummy'].sid == ''                    # null
    assert people['Frank Madeup'].sid == ''                 # no :sid: at all
    group = meta['submission_1000005']
    assert [p.name for p in group.submitters] == ['Erin Fictional', 'Frank Madeup']
    assert group.score == '100' and group.created_at.startswith('2024-09-30 21:15:03')
    assert meta['submission_1000003'].score == ''


def test_metadata_odd_but_readable_forms():
    text = ('submission_7:\n  :submitters: !ruby/object:Submitter\n    :name: Solo\n    :sid: 9.0e+8\n'
            '  :score: !ruby/object:BigDecimal 42.5\n'
            'submission_8:\n'
            ':submission_9:\n  :submitters:\n  - \n')
    meta = gradescope_export.parse_metadata(text)
    assert [p.name for p in meta['submission_7'].submitters] == ['Solo']
    assert meta['submission_7'].submitters[0].sid == '900000000'
    assert meta['submission_7'].score == '42.5'
    assert meta['submission_8'].submitters == [] and meta['submission_9'].submitters == []
    assert gradescope_export.parse_metadata('') == {} and gradescope_export.parse_metadata('# nothing\n') == {}


@pytest.mark.parametrize('text, words', [
    ('submission_1:\n  :submitters:\n  - :name: "unclosed\n', 'line 3 is not valid YAML'),
    ('submission_1: [a\nsubmission_2: b\n', 'is not valid YAML'),
    ('- just\n- a list\n', 'is not a mapping of submission folders'),
    ('submission_1:\n  :score: 1\nsubmission_2: {}\nsubmission_1:\n  :score: 3\n', 'lists submission_1 twice (line 4)'),
])
def test_bad_metadata_is_one_sentence(text, words):
    with pytest.raises(gradescope_export.ExportError) as e:
        gradescope_export.parse_metadata(text, 'submission_metadata.yml')
    message = str(e.value)
    assert words in message and '\n' not in message and 'Traceback' not in message, message


def test_folders_without_metadata_are_graded_and_reported(tmp_path):
    inner = synthetic_export.build(tmp_path, metadata=False)
    ex = gradescope_export.read(inner)
    folders = sorted(s for s, t in synthetic_export.TOTALS.items() if t is not None)
    assert ex.submissions == folders and ex.missing == []
    (tmp_path / synthetic_export.ASSIGNMENT / 'submission_metadata.yml').write_text(
        'submission_1000001:\n  :submitters: []\n')
    ex = gradescope_export.read(inner)
    assert ex.unlisted == folders[1:] and len(ex.submissions) == len(folders)


def test_not_an_export_says_what_was_expected(tmp_path):
    os.makedirs(tmp_path / 'a' / 'x')
    with pytest.raises(gradescope_export.ExportError, match='no Gradescope export in .*submission_metadata.yml'):
        gradescope_export.read(str(tmp_path / 'a'))
    with pytest.raises(gradescope_export.ExportError, match='does not exist'):
        gradescope_export.read(str(tmp_path / 'missing'))
    (tmp_path / 'f.zip').write_bytes(b'PK not really')
    with pytest.raises(gradescope_export.ExportError, match='neither a folder nor a zip'):
        gradescope_export.read(str(tmp_path / 'f.zip'))


def test_resume_stamp_follows_the_submission_and_the_grader(tmp_path, monkeypatch):
    sub = tmp_path / 'submission_1'
    os.makedirs(sub)
    (sub / 'model.py').write_text('x = 1\n')
    before = gradescope_export.submission_sha256(str(sub))
    (sub / 'results.json').write_text('{}')
    (sub / 'loss_curve.png').write_bytes(b'png')
    assert gradescope_export.submission_sha256(str(sub)) == before              # the grader's own outputs do not count
    stamp = dict(batch.stamp_for('cpu'), submission_sha256=before)
    assert set(stamp) == {'profile', 'fixtures_sha256', 'grading_yaml_sha256', 'grader_sha256', 'submission_sha256'}
    results_json = {'execution_time': 1.0, 'tests': [{'name': 't', 'score': 1, 'max_score': 1, 'status': 'passed'}],
                    'extra_data': {'batch': stamp}}
    (sub / 'results.json').write_text(json.dumps(results_json))
    assert batch.already_graded(str(sub), stamp)
    (sub / 'model.py').write_text('x = 2\n')                           # the student's file changed
    assert gradescope_export.submission_sha256(str(sub)) != before
    assert not batch.already_graded(str(sub),
                                    dict(stamp, submission_sha256=gradescope_export.submission_sha256(str(sub))))
    monkeypatch.setattr(batch.fixtures, 'sha256_files', lambda paths: 'another grader')
    assert batch.stamp_for('cpu')['grader_sha256'] == 'another grader'   # the harness or child code changed
    assert not batch.already_graded(str(sub), dict(batch.stamp_for('cpu'), submission_sha256=before))


def test_a_student_in_two_submissions_is_reported(tmp_path):
    text = synthetic_export.METADATA + ('submission_1000009:\n  :submitters:\n  - :name: Alice Again\n'
                                        '    :email: Alice.Example@example.edu\n')
    assert gradescope_export.duplicate_students(gradescope_export.parse_metadata(text)) == {
        'alice.example@example.edu': ['submission_1000001', 'submission_1000009']}


def test_a_damaged_zip_is_one_sentence_and_touches_nothing(tmp_path):
    good = synthetic_export.build_zip(tmp_path / 'good.zip')
    data = bytearray(open(good, 'rb').read())
    start = len(data) // 3
    for i in range(start, start + 2000):          # damage the compressed bytes of a member, keep the directory
        data[i] ^= 0x5A
    bad = tmp_path / 'assignment_4242_export.zip'
    bad.write_bytes(bytes(data))
    with pytest.raises(gradescope_export.ExportError, match='is a damaged zip .*download the export again'):
        gradescope_export.read(str(bad))
    assert not (tmp_path / 'assignment_4242_export').exists()
    assert not (tmp_path / 'assignment_4242_export.partial').exists()
    cut = tmp_path / 'cut.zip'
    cut.write_bytes(open(good, 'rb').read()[:5000])
    with pytest.raises(gradescope_export.ExportError, match='neither a folder nor a zip'):
        gradescope_export.read(str(cut))
