"""A local `grade batch` on the lab's default hidden seed says so, as the Actions regrade does; a seed given on the
command line or in ATTNLAB_SEED is quiet."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from grader.cli import cli

WARNING = "the class is graded with the lab's default hidden seed"


@pytest.mark.parametrize("given, warned", [((), True), (("--seed", "s3cret"), False), ("env", False)])
def test_a_batch_on_the_default_seed_warns_and_one_with_a_seed_of_its_own_does_not(tmp_path, monkeypatch, given,
                                                                                   warned):
    monkeypatch.delenv("ATTNLAB_SEED", raising=False)
    if given == "env":
        monkeypatch.setenv("ATTNLAB_SEED", "s3cret")
        given = ()
    (tmp_path / "alice").mkdir()  # no lab file: an error row, in a moment
    done = CliRunner().invoke(cli, ["batch", str(tmp_path / "alice"), "--out", str(tmp_path / "out" / "grades.csv"),
                                    "--quick", *given])
    assert done.exit_code == 0, done.output
    assert (WARNING in done.stderr) is warned, done.stderr
