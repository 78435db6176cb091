#!/usr/bin/env bash
# Set-up for Gradescope (runs once as root in /autograder/source at image build, system
# Python 3.10 on Ubuntu 22.04) and for a local machine. Safe to run again.
#
#   ./setup.sh            install Python packages, build data/input.txt, create the sandbox user
#   ./setup.sh --dry-run  print what would be done, change nothing
#
# Environment: PYTHON (default python3), TORCH_INDEX_URL (an index holding CPU-only torch
# wheels; on Gradescope it defaults to the PyTorch CPU index so that no CUDA packages are
# pulled), HW1_SKIP_DATA=1 (no corpus), HW1_SANDBOX_USER (default hw1student).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

PY=${PYTHON:-python3}
DRY=0
[[ "${1:-}" == "--dry-run" ]] && DRY=1
run() { echo "+ $*"; if [[ $DRY == 0 ]]; then "$@"; fi; }

on_gradescope=0
[[ -d /autograder/source && "$(pwd -P)" == /autograder/source* ]] && on_gradescope=1

if [[ $on_gradescope == 1 ]]; then
    # Gradescope's image has no pip for its system python3 out of the box
    if ! "$PY" -m pip --version >/dev/null 2>&1; then
        run apt-get update -qq
        run apt-get install -y -qq python3-pip
    fi
    TORCH_INDEX_URL=${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}
fi

torch_args=(torch==2.13.0)
[[ -n "${TORCH_INDEX_URL:-}" ]] && torch_args+=(--extra-index-url "$TORCH_INDEX_URL")
if "$PY" -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' 2>/dev/null; then
    echo "torch 2.13.0 already installed"
else
    run "$PY" -m pip install -q "${torch_args[@]}"
fi
run "$PY" -m pip install -q -r requirements.txt
# developers, CI and staff: pytest and the linter (requirements-dev.txt), matplotlib for the figures of
# `experiments` and `grade --png` (requirements-staff.txt). Never on Gradescope, and not from the
# unpacked Gradescope zip, which carries neither file.
if [[ $on_gradescope == 0 ]]; then
    for extra in requirements-dev.txt requirements-staff.txt; do
        if [[ -f $extra ]]; then run "$PY" -m pip install -q -r "$extra"; fi
    done
fi

if [[ "${HW1_SKIP_DATA:-0}" != 1 ]]; then
    run "$PY" data/build_corpus.py
fi

# the unprivileged users student code runs as (only possible, and only needed, as root):
# hw1student, plus hw1student1..3 so that parallel regrades (batch --jobs) never share one
user=${HW1_SANDBOX_USER:-hw1student}
if [[ $(id -u) == 0 ]]; then
    for u in "$user" "${user}1" "${user}2" "${user}3"; do
        id "$u" >/dev/null 2>&1 && continue
        if command -v adduser >/dev/null 2>&1; then
            run adduser --quiet --disabled-password --gecos "" --no-create-home "$u"
        else
            run useradd --no-create-home --shell /usr/sbin/nologin "$u"
        fi
    done
fi
# the sandbox user must be able to run the interpreter: grant traverse-only (o+x) access on the
# folders above it (e.g. /root/.pyenv on a developer machine; /usr/bin on Gradescope needs nothing)
if [[ $(id -u) == 0 ]] && id "$user" >/dev/null 2>&1; then
    for target in "$("$PY" -c 'import os,sys; print(os.path.realpath(sys.executable))')" \
                  "$("$PY" -c 'import importlib.util as u; print(u.find_spec("torch").origin)' 2>/dev/null || true)"; do
        d=$(dirname "$target")
        while [[ -n "$target" && "$d" != / ]]; do
            if [[ $(stat -c %A "$d") != *x ]]; then run chmod o+x "$d"; fi
            d=$(dirname "$d")
        done
    done
fi
echo "setup complete"
