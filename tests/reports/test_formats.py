"""The report formats are one table (grader/runner/formats.py): a format added there alone reaches the command line,
the grade and the grader's error path."""
from __future__ import annotations

import os
import subprocess
import sys

from grader import ROOT
from grader.runner import formats

# A format of one line per piece, added to the table and nowhere else, then `grade` run with it.
ADDED = """
import sys
from grader.runner import formats, report

formats.FORMATS["tsv"] = formats.Format(
    "one line per piece: name, points, out of",
    lambda runs, **_: "\\n".join(f"{r.name}\\t{report.piece_score(r)[0]}\\t{report.piece_score(r)[1]}" for r in runs),
    lambda line: "error\\t" + line, quick=%(quick)s)
from grader.cli import cli

cli(sys.argv[1:])
"""


def grade_with_tsv(*args: str, quick: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTNLAB_")}
    return subprocess.run([sys.executable, "-c", ADDED % {"quick": quick}, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_format_added_to_the_table_alone_is_offered_and_written_by_grade():
    done = grade_with_tsv("context", "--submission", "reference", "--format", "tsv", "--quick")
    assert done.returncode == 0, done.stdout + done.stderr
    piece, got, top = done.stdout.strip().splitlines()[-1].split("\t")
    assert piece == "context" and got == top and int(top) > 0


def test_a_format_that_a_quick_run_may_not_go_to_is_refused_with_quick_in_one_line():
    done = grade_with_tsv("context", "--submission", "reference", "--format", "tsv", "--quick", quick=False)
    assert done.returncode == 2
    assert "--quick cannot go with --format tsv" in done.stderr and "Traceback" not in done.stderr


def test_the_grader_error_of_each_format_is_its_own_and_posts_no_score_where_a_platform_reads_one():
    said = {name: formats.grader_error(name, "judge exited") for name in formats.FORMATS}
    assert said["classroom"] is None and said["classroom50"] is None  # no file: no score is posted
    assert '"score"' not in said["gradescope"] and "judge exited" in said["json"]
    assert said["text"].startswith(formats.report.GRADER_ERROR)


def test_the_help_names_every_format_in_the_table():
    text = formats.help_text()
    assert all(f"{name}: {f.help}" in text for name, f in formats.FORMATS.items())
