#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder image: the CPU build of PyTorch the lab is
# tested with (a 192 MB wheel; the default Linux build is the 5.6 GB CUDA one), then the lab.
set -euo pipefail
cd /autograder/source
command -v pip3 >/dev/null || { apt-get update && apt-get install -y python3-pip; }
python3 -m pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
python3 -m pip install --no-cache-dir -e .
