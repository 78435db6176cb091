"""
A realistic synthetic Gradescope "Export Submissions" download, built from one source in the
published format: `assignment_<id>_export/` holding `submission_<id>/` folders and
`submission_metadata.yml` (Ruby-symbol keys `:submitters:` with `:name:`, `:sid:`, `:email:`;
`:created_at:`, `:score:`, `:results:`, `:history:`). Every student is invented. The
submissions come from this checkout: the reference (100), the untouched template (0), a
syntax error (0), RoPE positions counted from 0 (100: a named bug, rope-positions-from-0), a zip
upload of the reference by a group of two (115 each) and a PDF-only upload (not graded, 0). The
awkward cases a real class brings are in too: accented names, SIDs as a number, empty or null,
and a metadata entry whose folder is missing.

    build(folder)            -> the inner assignment_<id>_export/ folder (written under `folder`)
    build_zip(path, folder)  -> the .zip as downloaded (its entries under assignment_<id>_export/)
"""

import io
import os
import zipfile

from grader_runs import REPO  # noqa: F401  (puts the checkout on sys.path)
from autograder.judge import source_patches

ASSIGNMENT = 'assignment_4242_export'
REFERENCE = os.path.join(REPO, 'reference', 'mingpt', 'model.py')
TEMPLATE = os.path.join(REPO, 'student_template', 'hw1', 'mingpt', 'model.py')
ROPE_FROM_0 = [('m = torch.arange(1, T + 1, dtype=torch.float64', 'm = torch.arange(0, T, dtype=torch.float64')]
SYNTAX_ERROR = [('        T = x.shape[-2] + offset\n', '        T = x.shape[-2] + offset +\n')]

# submission -> total it must get (the required 100 plus 15 of extra credit for a complete solution);
# None: listed in the metadata, but the export has no folder
TOTALS = {'submission_1000001': 115, 'submission_1000002': 0, 'submission_1000003': 0,
          'submission_1000004': 100, 'submission_1000005': 115, 'submission_1000006': None,
          'submission_1000007': 0}
# submission -> (status in the CSV, named bugs) where it is not plainly "graded" without a named bug
STATUS = {'submission_1000003': ('not graded', ''), 'submission_1000004': ('graded', 'rope-positions-from-0'),
          'submission_1000006': ('missing', ''), 'submission_1000007': ('not graded', '')}

METADATA = '''\
# Written by Gradescope's Ruby exporter: symbols as keys. Every person here is invented.
submission_1000001:
  :submitters:
  - :name: Alice Example
    :sid: '900000001'
    :email: alice.example@example.edu
  :created_at: 2024-09-30 20:01:12.123456789 -07:00
  :score: 100.0
  :results:
    :score: 100.0
    :execution_time: 14.2
    :output: graded mingpt/model.py. Profile cpu.
    :tests:
    - :name: model.py imports and exposes the handout interface
      :score: 0.0
      :max_score: 0.0
      :number: '1.1'
  :history: []
submission_1000002:
  :submitters:
  - :name: Bob Placeholder
    :sid: 900000002
    :email: bob.placeholder@example.edu
  :created_at: 2024-09-30 22:45:00.000000000 -07:00
  :score: 0.0
  :results:
    :score: 0.0
  :history:
  - :id: 999000002
    :created_at: 2024-09-29 10:00:00.000000000 -07:00
    :score: 0.0
    :results:
      :score: 0.0
submission_1000003:
  :submitters:
  - :name: Zoë Ångström-Núñez
    :sid: ''
    :email: zoe.angstrom@example.edu
  :created_at: 2024-10-01 09:30:41.500000000 -07:00
  :score:
  :results: {}
  :history: []
submission_1000004:
  :submitters:
  - :name: Dan Dummy
    :sid:
    :email: dan.dummy@example.edu
  :created_at: 2024-10-01 23:59:59.000000000 -07:00
  :score: 55.0
  :history:
  - :id: 999000004
    :created_at: 2024-10-01 20:00:00.000000000 -07:00
    :score: 40.0
submission_1000005:
  :submitters:
  - :name: Erin Fictional
    :sid: '900000005'
    :email: erin.fictional@example.edu
  - :name: Frank Madeup
    :email: frank.madeup@example.edu
  :created_at: 2024-09-30 21:15:03.000000000 -07:00
  :score: 100.0
  :history: []
submission_1000006:
  :submitters:
  - :name: Gina Nofolder
    :sid: '900000007'
    :email: gina.nofolder@example.edu
  :created_at: 2024-10-02 08:00:00.000000000 -07:00
  :score: 10.0
  :history: []
submission_1000007:
  :submitters:
  - :name: Hugo Pdfonly
    :sid: '900000008'
    :email: hugo.pdfonly@example.edu
  :created_at: 2024-10-01 22:10:00.000000000 -07:00
  :score: 0.0
  :history: []
'''


def _read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


def files():
    """{path inside the inner export folder: bytes}: the one source of every form of the export."""
    reference = _read(REFERENCE)
    upload = io.BytesIO()
    with zipfile.ZipFile(upload, 'w') as z:
        z.writestr('hw1/mingpt/model.py', reference)
        z.writestr('hw1/notes.txt', 'our notes\n')
    return {
        'submission_metadata.yml': METADATA.encode('utf-8'),
        'submission_1000001/model.py': reference.encode(),
        'submission_1000002/model.py': _read(TEMPLATE).encode(),
        'submission_1000003/model.py': source_patches.apply(reference, SYNTAX_ERROR, 'syntax error').encode(),
        'submission_1000004/mingpt/model.py': source_patches.apply(reference, ROPE_FROM_0, 'RoPE from 0').encode(),
        'submission_1000005/hw1_submission.zip': upload.getvalue(),
        'submission_1000007/hw1_writeup.pdf': b'%PDF-1.4\n% the written answers, and no model.py\n%%EOF\n',
    }


def _without_entry(data, sub):
    """The metadata without one submission's entry (the entries are top-level keys, two spaces inside)."""
    head, _, rest = data.decode().partition(sub + ':\n')
    tail = rest.split('\nsubmission_', 1)
    return (head + ('submission_' + tail[1] if len(tail) > 1 else '')).encode()


def build(folder, metadata=True, missing_entry=True):
    """Write the export under `folder`; returns the inner assignment_<id>_export/ folder."""
    inner = os.path.join(str(folder), ASSIGNMENT)
    for rel, data in files().items():
        if rel == 'submission_metadata.yml':
            if not metadata:
                continue
            if not missing_entry:
                data = _without_entry(data, 'submission_1000006')
        path = os.path.join(inner, *rel.split('/'))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as f:
            f.write(data)
    return inner


def build_zip(path, missing_entry=True):
    """The download: a zip whose entries sit under assignment_<id>_export/."""
    with zipfile.ZipFile(str(path), 'w', zipfile.ZIP_DEFLATED) as z:
        for rel, data in sorted(files().items()):
            if rel == 'submission_metadata.yml' and not missing_entry:
                data = _without_entry(data, 'submission_1000006')
            z.writestr(ASSIGNMENT + '/' + rel, data)
    return str(path)
