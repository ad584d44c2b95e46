"""Issue 32 §4: `grade batch --disk-budget SIZE` sets the disk the stagings in flight may fill (staging.Bound)."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from grader.cli import cli
from grader.cli.options import parse_size
from grader.regrade import staging


@pytest.mark.parametrize("text, size", [("4G", 4 << 30), ("500M", 500 << 20), ("1.5GB", 3 << 29), ("2gib", 2 << 30),
                                        ("64K", 64 << 10), ("2048", 2048), (" 1T ", 1 << 40)])
def test_a_size_is_a_number_and_a_binary_unit(text, size):
    assert parse_size(text) == size


def test_the_help_says_the_default_staging_uses():
    assert staging.DISK_BYTES == parse_size("4G")
    assert "default 4G" in " ".join(CliRunner().invoke(cli, ["batch", "--help"]).output.split())


@pytest.mark.parametrize("junk", ["lots", "4 GB please", "-1G", "0", "0M", "G", "", "4X", "1e9"])
def test_junk_is_a_bad_parameter_before_anything_is_graded(junk, tmp_path):
    result = CliRunner().invoke(cli, ["batch", str(tmp_path), "--disk-budget", junk, "--out", str(tmp_path / "g.csv")])
    assert result.exit_code == 2 and "Invalid value for '--disk-budget'" in result.output, result.output
    assert not (tmp_path / "g.csv").exists()


def test_the_budget_reaches_the_batch(tmp_path, monkeypatch):
    from grader.verbs import batch as verb

    seen = {}

    def main(**kwargs):
        seen.update(kwargs)
        return 0, 0

    monkeypatch.setattr(verb, "main", main)
    (tmp_path / "class").mkdir()
    result = CliRunner().invoke(cli, ["batch", str(tmp_path / "class"), "--disk-budget", "500M",
                                      "--out", str(tmp_path / "g.csv")])
    assert result.exit_code == 0, result.output
    assert seen["disk"] == 500 << 20
    CliRunner().invoke(cli, ["batch", str(tmp_path / "class"), "--out", str(tmp_path / "g.csv")])
    assert seen["disk"] is None  # the batch's own default, staging.DISK_BYTES
