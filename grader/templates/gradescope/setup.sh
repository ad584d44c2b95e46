#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder image: the CPU build of PyTorch the lab is
# tested with (a 192 MB wheel; the default Linux build is the 5.6 GB CUDA one), then the lab, both into an
# environment of its own: the system pip of Debian 12's and Ubuntu 24.04's Pythons refuses to install
# (externally-managed-environment, PEP 668). run_autograder runs the grader with this environment's Python.
set -euo pipefail
root="${AUTOGRADER_ROOT:-/autograder}"
cd "$root/source"
venv="$root/venv"
if ! python3 -m venv "$venv"; then  # Debian and Ubuntu ship venv's ensurepip apart
  rm -rf "$venv"
  apt-get update && apt-get install -y python3-venv
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
"$venv/bin/python" -m pip install --no-cache-dir -e .
