"""`python -I grader/workflow.py summary REPORT.json [ARTIFACT]` and `python -I grader/workflow.py reporter RUNNER`:
the per-push workflow's steps after `grade` (grader.runner.workflow_steps), run from this folder's grader with nothing
beside it importable, as boot.py runs `grade`: the repository's root is the student's.
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

from grader.runner.workflow_steps import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
