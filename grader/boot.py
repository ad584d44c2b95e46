"""`python -I grader/boot.py ARGS...`: the grade command, run from this folder's grader with nothing beside it
importable.

Where the grader sits inside a student's repository (a Classroom assignment), the repository's root is
theirs: a `sitecustomize.py`, a `torch.py` or a pytest plugin there must never load into the trusted process.
`-I` keeps the working directory, the script's folder, the user's site-packages and every `PYTHON*` variable
off; this file then loads the grader package by its path, without putting the folder above it on sys.path,
and the grader starts its own children the same way (grader.core.host.python).

The repository may also hold bytecode beside the grader's source: an unchecked-hash `.pyc` in a `__pycache__`
runs without its source ever being read. Before the first import every cached file under this folder is
removed, so what runs is the source, which the regrade compares with the release (grader.regrade.release_files).
grader/workflow.py loads the grader through this file (runpy), the same way.
"""
import importlib.util
import os
import shutil
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _no_bytecode(folder: str) -> None:
    """Remove every __pycache__ folder and stray .pyc under `folder`, never following a link."""
    for parent, folders, files in os.walk(folder):
        for name in [f for f in folders if f == "__pycache__"]:
            path = os.path.join(parent, name)
            if os.path.islink(path):
                os.unlink(path)
            else:
                shutil.rmtree(path)
            folders.remove(name)
        for name in files:
            if name.endswith((".pyc", ".pyo")):
                os.unlink(os.path.join(parent, name))


try:
    _no_bytecode(_here)
except OSError as e:  # a cached file left could run in place of its source: nothing runs
    sys.exit(f"Error: the grader's folder holds bytecode that cannot be removed ({e}); nothing was graded")
_spec = importlib.util.spec_from_file_location("grader", os.path.join(_here, "__init__.py"),
                                               submodule_search_locations=[_here])
_package = importlib.util.module_from_spec(_spec)
sys.modules["grader"] = _package
_spec.loader.exec_module(_package)

if __name__ == "__main__":
    from grader.cli import cli

    cli(prog_name="grade")
