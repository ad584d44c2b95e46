"""Hidden cases for the `context` piece: attention_context."""
from __future__ import annotations

import time

import pytest
import torch

from grader.judge import verdicts
from grader.judge.workers import RemoteError, WorkerLost
from . import util

pytestmark = pytest.mark.piece("context")
WEIGHTED_SUM = "it is the alpha weighted sum of encoder states"  # the case whose check names the usual causes


def inputs(B: int, T: int, H: int, device: str = "cpu"):
    alpha = torch.softmax(torch.randn(B, T), dim=-1).to(device)  # (B, T)
    return alpha, torch.randn(B, T, H).to(device)


def context_of(sub, alpha, enc):
    return verdicts.call(sub.fn("attention_context"), alpha, enc, what="attention_context")


@pytest.mark.points(3)
def test_it_is_the_alpha_weighted_sum_of_encoder_states(sub, ref):
    s = util.MAIN
    alpha, enc = inputs(s.B, s.T, s.H)
    got = verdicts.tensor(context_of(sub, alpha, enc), "context", (s.B, s.H))
    want = (alpha[..., None] * enc).sum(1)  # (B, H): sum_i alpha_i h_i
    verdicts.close(got, want, "context", "Weight each encoder state h_i by alpha_i and sum over the source positions "
                 "(alpha as (B, 1, T_src) times encoder_outputs (B, T_src, H)).")


@pytest.mark.points(1)
def test_a_one_hot_alpha_picks_one_state(sub, ref):
    s = util.MAIN
    enc = torch.randn(s.B, s.T, s.H)
    pick = torch.randint(0, s.T, (s.B,))
    alpha = torch.nn.functional.one_hot(pick, s.T).float()
    got = verdicts.tensor(context_of(sub, alpha, enc), "context", (s.B, s.H))
    verdicts.close(got, enc[torch.arange(s.B), pick], "context for a one-hot alpha",
                 "With all weight on position i, the context must be exactly h_i of that sentence.")


@pytest.mark.points(1)
@pytest.mark.parametrize("s", util.EDGES)
def test_it_handles_edge_sizes(sub, ref, s):
    alpha, enc = inputs(s.B, s.T, s.H)
    got = verdicts.tensor(context_of(sub, alpha, enc), "context", (s.B, s.H))
    want = ref.context.attention_context(alpha, enc)
    util.right_at_the_edge("the context", {"context": (got, want)}, lambda: right_at_the_usual_sizes(sub), WEIGHTED_SUM,
                           squeeze=" (squeeze(1))")


def right_at_the_usual_sizes(sub) -> None:
    s = util.MAIN
    alpha, enc = inputs(s.B, s.T, s.H)
    util.close(verdicts.tensor(context_of(sub, alpha, enc), "context", (s.B, s.H)), (alpha[..., None] * enc).sum(1), "context", "")


# The no-loop case is decided from behaviour, measured here in the judge (a count or a timing the worker reported
# could be forged): the time of one call of attention_context (gradients on, as in training) for two very long
# sentences and for many short ones holding as many encoder states in all, so that the bytes on the wire and the
# multiply-adds of any vectorised spelling are the same and only the number of source positions differs. A batched
# product takes about as long for both; a Python loop over the positions, however it is spelled (for, while, map or
# reduce, a comprehension, recursion, in torch or in numpy), pays a microsecond or more per position: a fifth of a
# second more here. A tiny call bounds the long one's own time, more loosely: a loop over every number (which the short
# sentences pay as well) or short calls padded with sleeps to look as slow as long ones show there. Every timed call
# has fresh inputs (an answer kept from an earlier call cannot be timed) and its value is checked.
TINY, MANY_SHORT, TWO_LONG = (2, 16, 2), (16384, 16, 1), (2, 131072, 1)  # (B, T_src, H); the last two: same B * T
PAIRS, ROUNDS = 3, 4  # calls at each size per round; rounds at most, while a measurement is borderline
# Limits in seconds, as (below: passes, above: fails, in between: measured again, and after the last round the middle
# decides), on the minimum of each size's calls. tests/redteam/test_loops.py has what they were chosen from.
POSITIONS = (0.030, 0.060, 0.120)  # the long sentences' time less the short ones'
OWN_TIME = (0.060, 0.100, 0.200)  # the long sentences' time less the tiny call's, at most PER_CALL of it
PER_CALL = 0.020  # the most of the tiny call's time taken as the cost of any call (code that prints, say)
CALL_LIMIT = 2.5  # seconds one timed call may take before it is stopped (a torch loop takes about 1 s)
FIX = "Weight and sum all positions at once with one batched product (torch.bmm)."
KINDS = "a Python loop over positions (for, while, map, reduce, a comprehension or recursion, in torch or numpy)"
IN_THE_GRAPH = ("The context must be one differentiable torch computation of alpha and encoder_outputs (no .detach(), "
                ".item(), .tolist(), .numpy() or tensors rebuilt from values): the decoder trains through it.")


def sentences(shape: tuple[int, int, int]) -> str:
    B, T, _ = shape
    return f"{B} sentence{'s' if B > 1 else ''} of {T} positions"


def input_grads(sub, alpha, enc):
    """The worker's gradients of attention_context(alpha, enc).square().sum() with respect to both inputs."""
    try:
        return sub.fn("attention_context").input_grads(alpha, enc, wrt=[0, 1])
    except RemoteError as e:
        if "does not require grad" in str(e):
            verdicts.fail(f"no gradient reaches alpha or the encoder outputs. {IN_THE_GRAPH}")
        raise verdicts.student_failure(e, "backward through attention_context") from None


def check_gradients(sub, ref) -> None:
    """One differentiable function of both inputs: the worker's gradients against the reference's, computed here."""
    s = util.MAIN
    alpha, enc = inputs(s.B, s.T, s.H)
    got = input_grads(sub, alpha, enc)
    a, e = alpha.clone().requires_grad_(True), enc.clone().requires_grad_(True)
    ref.context.attention_context(a, e).square().sum().backward()
    if not isinstance(got, list) or len(got) != 2:
        verdicts.fail("the grader could not read the gradients of attention_context.")
    for name, g, want in (("alpha", got[0], a.grad), ("the encoder outputs", got[1], e.grad)):
        if not isinstance(g, torch.Tensor):
            verdicts.fail(f"no gradient reaches {name}. {IN_THE_GRAPH}")
        util.close(g, want, f"the gradient with respect to {name}", IN_THE_GRAPH)


def timed(sub, ref, shape: tuple[int, int, int]) -> float:
    """The seconds, on the judge's clock, of one call of attention_context (gradients on, as in training) on fresh
    inputs of `shape` (an answer kept from an earlier call cannot be timed), whose value must be the reference's."""
    alpha, enc = inputs(*shape)
    what = f" for {sentences(shape)}"
    saved = sub.deadline
    ours = time.monotonic() + CALL_LIMIT < saved  # else the case's own deadline comes first, and its timeout says so
    sub.deadline = min(saved, time.monotonic() + CALL_LIMIT)
    try:
        start = time.perf_counter()
        got = sub.fn("attention_context")(alpha, enc)
        spent = time.perf_counter() - start
    except WorkerLost as e:
        if not (e.timed_out and ours):
            raise
        verdicts.fail(f"attention_context took over {CALL_LIMIT:g} s{what}: that is {KINDS}. {FIX}")
    except RemoteError as e:
        if e.kind == "recursion":
            verdicts.fail(f"attention_context hit Python's recursion limit{what}: recursion over positions is a Python "
                          f"loop too. {FIX}")
        raise verdicts.student_failure(e, f"attention_context{what}") from None
    finally:
        sub.deadline = saved
    got, want = verdicts.tensor(got, f"the context{what}"), ref.context.attention_context(alpha, enc)
    if got.numel() == want.numel():  # a size-1 dimension squeezed away: the edge-size case charges that
        got = got.reshape(want.shape)
    util.close(got, want, f"the context{what}", "It is right at the usual sizes: compute the same thing at every size.")
    return spent


def decided(value: float, limits: tuple[float, float, float], last: bool) -> bool | None:
    """Whether a measurement passes (True), fails (False) or must be taken again (None): only a borderline one is
    measured again, and the last round decides at the middle of the band, so one submission gets one verdict."""
    low, middle, high = limits
    if value < low or value > high:
        return value < low
    return value <= middle if last else None


@pytest.mark.points(2)
def test_it_runs_no_python_loop_over_positions(sub, ref):
    s = util.MAIN
    for T in (4, 32):  # the property is paid only when the values are right
        alpha, enc = inputs(s.B, T, s.H)
        got = verdicts.tensor(context_of(sub, alpha, enc), "context", (s.B, s.H))
        util.close(got, (alpha[..., None] * enc).sum(1), "context", util.see(WEIGHTED_SUM))
    check_gradients(sub, ref)  # one differentiable function of both inputs, as the reference is
    times: dict[tuple, list[float]] = {TINY: [], MANY_SHORT: [], TWO_LONG: []}
    for round_ in range(1, ROUNDS + 1):
        for _ in range(PAIRS):  # interleaved: every size sees the same load on the machine
            for shape in times:
                times[shape].append(timed(sub, ref, shape))
        tiny, short, long = (min(times[shape]) for shape in (TINY, MANY_SHORT, TWO_LONG))
        last = round_ == ROUNDS
        positions, own = decided(long - short, POSITIONS, last), decided(long - min(tiny, PER_CALL), OWN_TIME, last)
        if positions is False:
            verdicts.fail(f"attention_context takes longer for {sentences(TWO_LONG)} than for {MANY_SHORT[0]} of "
                          f"{MANY_SHORT[1]}, as many states: that is {KINDS}. {FIX}")
        if own is False:
            verdicts.fail(f"attention_context takes far longer for {sentences(TWO_LONG)} than for a tiny batch: "
                          f"that is {KINDS}. {FIX}")
        if positions and own:
            return


@pytest.mark.points(1)
def test_tensors_follow_the_input_device(sub, ref):
    s = util.MAIN
    alpha, enc = inputs(s.B, s.T, s.H)
    want = ref.context.attention_context(alpha, enc)
    util.right_on_the_cpu({"context": (context_of(sub, alpha, enc), want)}, WEIGHTED_SUM)
    util.same_on_a_device(sub.fn("attention_context"), alpha, enc, what="attention_context",
                          result=lambda got: verdicts.tensor(got, "context", (s.B, s.H)),
                          outs=[util.Out("the context", (), want)])


@pytest.mark.points(0)
def test_cuda_matches_cpu(sub, ref):
    def context_on(dev):
        alpha, enc = inputs(util.MAIN.B, util.MAIN.T, util.MAIN.H)
        return context_of(sub, alpha.to(dev), enc.to(dev)), ref.context.attention_context(alpha, enc)
    util.cuda_matches_cpu(context_on, "context")
