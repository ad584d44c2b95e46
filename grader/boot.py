"""`python -I grader/boot.py ARGS...`: the grade command, run from this folder's grader with nothing beside it
importable.

Where the grader sits inside a student's repository (a Classroom assignment), the repository's root is
theirs: a `sitecustomize.py`, a `torch.py` or a pytest plugin there must never load into the trusted process.
`-I` keeps the working directory, the script's folder, the user's site-packages and every `PYTHON*` variable
off; this file then loads the grader package by its path, without putting the folder above it on sys.path,
and the grader starts its own children the same way (grader.core.host.python).
"""
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("grader", os.path.join(_here, "__init__.py"),
                                               submodule_search_locations=[_here])
_package = importlib.util.module_from_spec(_spec)
sys.modules["grader"] = _package
_spec.loader.exec_module(_package)

from grader.cli import cli  # noqa: E402

cli(prog_name="grade")
