"""`python -I grader/workflow.py summary REPORT.json [ARTIFACT]` and `python -I grader/workflow.py reporter RUNNER`:
the per-push workflow's steps after `grade` (grader.runner.workflow_steps), run from this folder's grader with nothing
beside it importable, as boot.py runs `grade`: the repository's root is the student's.
"""
import os
import runpy
import sys

# the grader loaded as `grade` loads it, no bytecode of the repository's read: run_path compiles boot.py's source
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "boot.py"))

from grader.runner.workflow_steps import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
