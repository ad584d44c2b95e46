"""`grade --plots`'s progress line: the time left is an estimate from this run's own steps, and says so (issue 49:
"at most 308 s left" was followed by 690 s more on a busy machine)."""
from __future__ import annotations

from grader.plots import models


def test_the_plots_progress_line_estimates_the_time_left_from_this_runs_own_steps_and_says_it_is_an_estimate(
        monkeypatch, capsys):
    step, total, elapsed = 400, 2600, 120.0
    monkeypatch.setattr(models.time, "perf_counter", lambda: 1000.0 + elapsed)
    models._progress("Bahdanau", step, total, start=1000.0)
    line = capsys.readouterr().err.strip()
    left = (total - step) * elapsed / step  # the time per step so far, times the steps left
    assert line.startswith(f"plots: Bahdanau step {step}/{total}  {elapsed:.0f} s, about {left:.0f} s ")
    assert "estimate" in line and "at most" not in line
