"""The context's no-loop points where a loop runs few iterations or a busy machine inflates every time (issue 49):
a loop over the shorter side in torch, TorchScript, vmap, reduce or numpy, however it dodges the count of torch
calls, loses them at the chain's square shape; honest spellings keep them beside two other full grades and busy loops, and the same loops still lose them there.
bench/load.py repeats the busy half 20 times each and prints the counts."""
from __future__ import annotations

import pytest

from helpers import grade_dict
from .harness import judge
from .short_side import BUSY_BMM, HONEST, LOOPS, PRINTING, busy_machine, source
from .test_loops import FOR_LOOP, NO_LOOP, loses_only_the_no_loop_points

pytestmark = pytest.mark.slow  # grades in jailed workers under load: the full suite (CI) runs it

CAUSE = "a Python loop over the sentences or the positions"


def no_loop_case(report: dict) -> dict:
    cases = next(p["cases"] for p in report["pieces"] if p["name"] == "context")
    return next(c for c in cases if c["name"] == NO_LOOP)


@pytest.mark.parametrize("how", list(LOOPS))
def test_a_loop_over_the_shorter_side_loses_the_no_loop_points_however_it_dodges_the_count(lab, how):
    g = judge(lab(files={"context": source(*LOOPS[how])}), ["context"])
    loses_only_the_no_loop_points(g, CAUSE)
    message = g.messages("context")[NO_LOOP]
    assert "torch.bmm" in message  # the hint names the fix, not the code
    assert "sentences" in message and "positions" in message  # and the sides it measured


def test_an_honest_product_that_prints_at_every_call_keeps_the_no_loop_points(lab):
    """The worker prints tensors briefly while it chains calls, so a print costs a call the same at the chain's base
    shape as at its square one, and what it costs at the base is forgiven (up to PRINTING a call)."""
    g = judge(lab(files={"context": source(PRINTING)}), ["context"])
    assert NO_LOOP not in g.messages("context"), g.messages("context")


def test_a_loop_over_the_shorter_side_behind_a_busy_worker_bmm_loses_the_no_loop_points(lab):
    body, end = LOOPS["a loop over the shorter side only above the sizes where calls are counted"]
    g = judge(lab(files={"context": source(body, end + BUSY_BMM)}), ["context"])
    loses_only_the_no_loop_points(g, CAUSE)


def test_beside_two_full_grades_and_busy_loops_honest_code_keeps_the_points_and_loops_lose_them(lab):
    honest = {how: lab(files={"context": source(body)}) for how, body in {**HONEST, "a print": PRINTING}.items()}
    loops = {how: lab(files={"context": source(*LOOPS[how])}) for how in
             ("a loop over the shorter side in TorchScript",
              "a loop over the shorter side with the worker's calls command forged")}
    loops["a for loop over the positions"] = lab(files={"context": source(FOR_LOOP)})
    kept, lost = {}, {}
    with busy_machine(grades=2, hogs=2):
        for i, (how, sub) in enumerate({**honest, **loops}.items()):
            case = no_loop_case(grade_dict(sub, ["context"], seed=f"busy-{i}"))
            (kept if case["passed"] else lost)[how] = case["message"]
    assert set(kept) == set(honest), lost  # no honest spelling lost them, and no loop kept them
    assert all("timed out" not in m for m in lost.values()), lost  # each loop lost them for its loop
