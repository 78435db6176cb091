#!/usr/bin/env bash
# Set-up for Gradescope (runs once as root in /autograder/source at image build, system
# Python 3.10 on Ubuntu 22.04) and for a local machine. Safe to run again.
#
#   ./setup.sh            install Python packages, build data/input.txt, create the sandbox users
#   ./setup.sh --dry-run  print what would be done, change nothing
#
# Environment: PYTHON (default python3), TORCH_INDEX_URL (an index holding CPU-only torch
# wheels; on Gradescope it defaults to the PyTorch CPU index so that no CUDA packages are
# pulled), HW1_SKIP_DATA=1 (no corpus), HW1_SANDBOX_USER (default: grading.yaml sandbox.user),
# HW1_KEEP_TORCH=1 (keep the torch installed, whatever its version: a GPU machine's own CUDA build),
# HW1_NO_EXTRAS=1 (no developers' or staff extras, no editable install: a machine that only grades).
# A machine without network installs from a wheelhouse through pip's own variables:
# PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR (bench/gpu_grading.py, which makes DIR with --make-wheelhouse).
#
# As root it also creates the sandbox users (grading.yaml sandbox.user and pool_size) and, where the
# interpreter lives in a folder other users cannot enter (pyenv under /root), a hard-linked copy of
# the installation at sandbox.python_copy. It opens no folder to other users. Each change it makes
# is printed as "+ command".
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
elif [[ "${HW1_KEEP_TORCH:-0}" == 1 ]] && "$PY" -c 'import torch' 2>/dev/null; then
    echo "torch $("$PY" -c 'import torch; print(torch.__version__)') kept (HW1_KEEP_TORCH=1)"
else
    run "$PY" -m pip install -q "${torch_args[@]}"
fi
run "$PY" -m pip install -q -r requirements.txt
# developers, CI and staff: pytest, its two workers (pytest-xdist) and the linter (requirements-dev.txt), matplotlib for the figures of
# `experiments` and `grade --png`, pandas/tabulate/markdown for the class report (requirements-staff.txt). Never on Gradescope, and not from the
# unpacked Gradescope zip, which carries neither file.
if [[ $on_gradescope == 0 && "${HW1_NO_EXTRAS:-0}" != 1 ]]; then
    for extra in requirements-dev.txt requirements-staff.txt; do
        if [[ -f $extra ]]; then run "$PY" -m pip install -q -r "$extra"; fi
    done
    # the `hw1-autograder` command, from any folder (editable: it grades with this checkout's files). Without build
    # isolation the build runs on this interpreter's own setuptools: a fresh venv's (65.5 on Python 3.11, none from
    # 3.12) has no bdist_wheel unless `wheel` is installed ("invalid command 'bdist_wheel'"), and setuptools 70.1
    # carries it itself: install that first where neither is there
    if [[ -f pyproject.toml ]]; then
        if ! "$PY" -c 'import setuptools.command.bdist_wheel' 2>/dev/null && ! "$PY" -c 'import setuptools, wheel' 2>/dev/null; then
            run "$PY" -m pip install -q "setuptools>=70.1"
        fi
        run "$PY" -m pip install -q --no-deps --no-build-isolation -e .
    fi
fi

if [[ "${HW1_SKIP_DATA:-0}" != 1 ]]; then
    run "$PY" data/build_corpus.py
fi

# ----------------------------------------------------------------------------- sandbox (root only)
# One value, one place: the user name, pool size and interpreter copy come from grading.yaml's
# sandbox section (read with a regex: PyYAML may not be installed yet on a --dry-run).
yaml_get() {
    "$PY" -c 'import re, sys; m = re.search(r"^\s+%s:\s*([^\s#]+)" % re.escape(sys.argv[1]), open("grading.yaml").read(), re.M); print(m.group(1) if m else "")' "$1"
}
user=${HW1_SANDBOX_USER:-$(yaml_get user)}
pool_size=$(yaml_get pool_size)
python_copy=${HW1_PYTHON_COPY:-$(yaml_get python_copy)}   # another Python beside the first (README: Python 3.10)

if [[ $(id -u) != 0 ]]; then
    echo "not root: no sandbox users (student code runs as $(id -un), isolated by process and seccomp only)"
    echo "setup complete"
    exit 0
fi

# the pool of unprivileged users student code runs as, one per concurrent grading (batch --jobs),
# each with a group of its own (a grading's scratch folder is open to that group only)
pool=("$user")
for ((i = 1; i < ${pool_size:-1}; i++)); do pool+=("$user$i"); done
for u in "${pool[@]}"; do
    if id "$u" >/dev/null 2>&1; then
        echo "sandbox user $u exists"
    elif command -v adduser >/dev/null 2>&1; then
        run adduser --quiet --disabled-password --gecos "" --no-create-home "$u"
    else
        run useradd --user-group --no-create-home --shell /usr/sbin/nologin "$u"
    fi
done

# The sandbox user must run the interpreter and read torch. No folder is opened up for it: where
# Python lives in a closed one (pyenv under /root), the installation is copied outside it to
# sandbox.python_copy (hard links on the same file system: seconds, no extra space).
can_run() {  # USER INTERPRETER TORCH_DIR: exit 0 when USER can run the one and read the other
    "$PY" -c 'import os, pwd, sys
pw = pwd.getpwnam(sys.argv[1])
pid = os.fork()
if pid == 0:
    os.setgroups([]); os.setresgid(pw.pw_gid, pw.pw_gid, pw.pw_gid); os.setresuid(pw.pw_uid, pw.pw_uid, pw.pw_uid)
    os._exit(0 if os.access(sys.argv[2], os.X_OK) and os.access(sys.argv[3], os.R_OK) else 1)
sys.exit(os.waitpid(pid, 0)[1] != 0)' "$@"
}
prefix_of() {  # PATH: the installation it lies in, as the grader maps it to the copy (users.py: standard library only,
    # loaded by its path, since the sandbox package needs numpy, which a --dry-run may not have yet)
    "$PY" -B -c 'import importlib.util as u, sys
spec = u.spec_from_file_location("hw1_users", "autograder/sandbox/users.py"); users = u.module_from_spec(spec)
spec.loader.exec_module(users); print(users.installation_prefix(sys.argv[1]) or "")' "$1" || true
}
link_tree() {  # SRC DST: hard links of SRC's files into DST (a real copy on another file system); DST's own files give way
    run mkdir -p "$2"
    run cp -al --remove-destination "$1/." "$2/" 2>/dev/null || run cp -a --remove-destination "$1/." "$2/"
}
if id "$user" >/dev/null 2>&1; then
    exe=$("$PY" -c 'import os, sys; print(os.path.realpath(sys.executable))')
    torch_dir=$("$PY" -c 'import importlib.util as u, os; print(os.path.dirname(u.find_spec("torch").origin))' 2>/dev/null || true)
    exe_prefix=$(prefix_of "$exe")
    torch_prefix=$(if [[ -n "$torch_dir" ]]; then prefix_of "$torch_dir"; fi)
    if [[ -z "$torch_dir" ]]; then
        echo "torch is not installed yet (dry run?): the interpreter check is skipped"
    elif can_run "$user" "$exe" "$torch_dir" && [[ "${HW1_FORCE_PYTHON_COPY:-0}" != 1 ]]; then
        echo "sandbox user $user can run $exe and read torch: nothing to grant"
    elif [[ -z "$exe_prefix" || -z "$torch_prefix" ]]; then
        echo "WARNING: $user cannot run $exe or read $torch_dir, and they are not in one installation (or a venv"
        echo "         and its base) that could be copied: the grader will refuse to run student code. Install Python where others can read it."
    else
        copy_exe=$python_copy/${exe#"$exe_prefix"/}
        copy_torch=$python_copy/${torch_dir#"$torch_prefix"/}
        if [[ -e "$copy_exe" && "$(stat -c %i "$exe" "$torch_dir/__init__.py")" == "$(stat -c %i "$copy_exe" "$copy_torch/__init__.py" 2>/dev/null)" ]] \
           && can_run "$user" "$copy_exe" "$copy_torch"; then
            echo "the interpreter copy $python_copy is current (hard links to $exe_prefix)"
        else
            echo "$user cannot reach $exe (a closed folder): copying $exe_prefix to $python_copy"
            run rm -rf "$python_copy.new"
            link_tree "$exe_prefix" "$python_copy.new"
            if [[ "$torch_prefix" != "$exe_prefix" ]]; then   # torch in a venv: its site-packages join the base's copy
                site=$(dirname "$torch_dir")
                site_copy=$python_copy.new/${site#"$torch_prefix"/}
                echo "adding $site (a venv of $exe_prefix) to the copy"
                if ! grep -qs '^include-system-site-packages *= *true' "$torch_prefix/pyvenv.cfg"; then
                    run rm -rf "$site_copy"   # the venv sees only its own packages: so does the copy
                fi
                link_tree "$site" "$site_copy"
            fi
            run chmod 755 "$python_copy.new"
            run rm -rf "$python_copy"
            run mv "$python_copy.new" "$python_copy"
            if [[ $DRY == 0 ]] && ! can_run "$user" "$copy_exe" "$copy_torch"; then
                echo "WARNING: $user still cannot run $copy_exe: the grader will refuse to run student code"
            fi
        fi
    fi
fi
# Without namespaces (Gradescope's Docker) the sandbox user's files are removed from every folder it can
# write to after each probe: list those folders once now (a scan of the whole file system, seconds), so that
# gradings do not repeat it (autograder/sandbox/leftovers.py; volatile ones like /tmp are added at run time)
if [[ $DRY == 0 ]] && id "$user" >/dev/null 2>&1 && "$PY" -c 'import torch' 2>/dev/null; then
    run "$PY" -m autograder sandbox scan
fi
echo "setup complete"
