"""The linters every GitHub workflow the lab writes passes (the per-push workflow, the regrade's): GitHub's workflow
schema (check-jsonschema) and zizmor, with GitHub's own actions pinned by tag and every other action by hash."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent  # the venv's zizmor and check-jsonschema
ZIZMOR_CONFIG = Path(__file__).parent / "regrade" / "zizmor.yml"


def tool(name: str) -> Path:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed in this venv (pip install -e '.[test]')")
    return path


def schema_findings(workflow: Path) -> str:
    """What check-jsonschema says against GitHub's workflow schema ("" when the workflow passes)."""
    done = subprocess.run([str(tool("check-jsonschema")), "--builtin-schema", "vendor.github-workflows", str(workflow)],
                          capture_output=True, text=True, timeout=120)
    return "" if done.returncode == 0 else done.stdout + done.stderr


def zizmor_findings(workflow: Path) -> str:
    """What zizmor finds offline under the lab's config ("" for none)."""
    done = subprocess.run([str(tool("zizmor")), "--offline", "--config", str(ZIZMOR_CONFIG), "--format", "plain",
                           str(workflow)], capture_output=True, text=True, timeout=120)
    said = done.stdout + done.stderr
    return "" if done.returncode == 0 and "No findings" in said else said
