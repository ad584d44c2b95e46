"""Hidden cases for the `context` piece: attention_context."""
from __future__ import annotations

import io
import time

import pytest
import torch

from grader.judge import verdicts
from grader.judge.workers import RemoteError, WorkerLost
from grader.worker import wire
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
# could be forged), and symmetrically: a loop over the sentences loses as a loop over the positions does. Calls of
# attention_context (gradients on, as in training) on two shapes drawn from the case's hidden seed, a few long sentences
# (a loop over the positions pays there) and many short ones (a loop over the sentences pays there), are each timed on
# the judge's clock between two calls of the batched product itself (torch.bmm, the worker's own trusted command, on
# other inputs of the same shape, so that no answer of its can be kept and given back as the student's): the wire, the machine's load and its speed are in both, so the margin is a ratio, not milliseconds. A
# batched product in any spelling costs about what bmm costs at both shapes; a loop over the positions or the sentences,
# however it is spelled (for, while, map or reduce, a comprehension, recursion, in torch, numpy or on Python floats),
# pays many times bmm's time at one of them. Code that slows the worker's own bmm to widen its margin gains at most
# BOUND times the judge's own time for the same bytes and product. Every timed call has fresh inputs (an answer kept
# from an earlier call cannot be timed) and its value is checked.
PAIRS, ROUNDS = 3, 4  # calls at each shape per round; rounds at most, while a measurement is borderline
# The limits, on (the student's time - PER_CALL) / bmm's time, each the minimum over the calls so far at one shape, as
# (below: passes, above: fails, in between: measured again, and after the last round the middle decides).
# tests/redteam/test_loops.py has what they were chosen from.
RATIO = (2.0, 3.0, 8.0)
PER_CALL = 0.002  # seconds of any call's own cost (code that prints, say) not counted against it
BOUND = 4  # bmm's time counts for at most this many times the judge's own (here_time), whatever the worker does
EARLY = 1.5  # below this after any pair of calls (and bmm under its bound), a round ends at once: it passes
CALL_LIMIT = 2.5  # seconds one timed call may take before it is stopped (a torch loop takes about 1 s)
FIX = "Weight and sum every position of every sentence at once, with one batched product (torch.bmm)."
LOOPS = "runs a Python loop over the sentences or the positions"
IN_THE_GRAPH = ("The context must be one differentiable torch computation of alpha and encoder_outputs (no .detach(), "
                ".item(), .tolist(), .numpy() or tensors rebuilt from values): the decoder trains through it.")


def probe_shapes(seed: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(B, T_src, H) of the few long sentences and of the many short ones, drawn from the case's hidden seed."""
    g = torch.Generator().manual_seed(seed)

    def draw(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (1,), generator=g))

    H = draw(2, 4)
    return (draw(2, 4), draw(48_000, 80_000), H), (draw(24_000, 40_000), draw(4, 8), H)


def sentences(shape: tuple[int, int, int]) -> str:
    B, T, _ = shape
    return f"{B} sentence{'s' if B > 1 else ''} of {T} position{'s' if T > 1 else ''}"


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


# (B, T_src) where the torch calls are counted: each side grows while the other stays. Counting decides where timing
# cannot: a loop over the shorter side, or one that loops only at small sizes, runs few iterations where it is timed
COUNTED = ((2, 3), (2, 7), (5, 3), (5, 7))


def calls_at(sub, B: int, T: int, H: int) -> int:
    """The torch calls one call of attention_context makes on fresh inputs of (B, T, H), as its worker counts them."""
    try:
        n = sub.fn("attention_context").calls(*inputs(B, T, H))
    except RemoteError as e:
        raise verdicts.student_failure(e, f"attention_context for {sentences((B, T, H))}") from None
    if type(n) is not int:
        verdicts.fail("the grader could not count attention_context's torch calls: something in the worker changed "
                      "its answer.")
    return n


def check_calls(sub, H: int) -> None:
    """One batched product makes as many torch calls at every size; a loop over either side makes more as it grows."""
    n = {bt: calls_at(sub, *bt, H) for bt in COUNTED}
    if len(set(n.values())) == 1:
        return
    sides = [side for side, (a, b) in (("positions", ((2, 3), (2, 7))), ("sentences", ((2, 3), (5, 3))))
             if n[a] != n[b]] or ["sentences and positions"]
    verdicts.fail(f"attention_context {LOOPS}: the number of torch operations it runs grows with the number of "
                  f"{' and '.join(sides)}, which one batched product's does not. {FIX}")


def here_time(alpha, enc) -> float:
    """The seconds the judge itself takes for the work of the worker's bmm command on these inputs (the request
    written and read as the wire does, the product, its answer written and read back), all but the two processes
    waking: a bound on the worker's time that code slowing the worker's own bmm cannot move."""
    start = time.perf_counter()
    frame = io.BytesIO()
    torch.save(wire.encode([alpha, enc]), frame)
    a, e = wire.decode(torch.load(io.BytesIO(frame.getvalue()), weights_only=False))
    answer = io.BytesIO()
    torch.save(wire.encode(torch.bmm(a.unsqueeze(1), e).squeeze(1)), answer)
    torch.load(io.BytesIO(answer.getvalue()), weights_only=True)
    return time.perf_counter() - start


def bmm_time(sub, alpha, enc) -> float:
    """The seconds, on the judge's clock, of the worker's own batched product on these inputs (same wire both ways)."""
    start = time.perf_counter()
    try:
        sub.run({"cmd": "bmm"}, (alpha, enc))
    except RemoteError as e:  # only code that broke torch in its own worker gets here
        raise verdicts.student_failure(e, "the batched product beside attention_context") from None
    return time.perf_counter() - start


def timed(sub, ref, shape: tuple[int, int, int]) -> tuple[float, float, float]:
    """(the seconds of one call of attention_context, the least of the worker's bmm just before and just after (each on
    inputs of its own), the judge's own here_time), on the judge's clock, on fresh inputs of `shape` (an answer kept
    from an earlier call cannot be timed) whose value must be the reference's."""
    alpha, enc = inputs(*shape)
    what = f" for {sentences(shape)}"
    # bmm runs in the student's process: on the timed call's own inputs, its answer could be kept and returned as theirs
    before = bmm_time(sub, *inputs(*shape))
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
        verdicts.fail(f"attention_context {LOOPS}: it took over {CALL_LIMIT:g} s{what}. {FIX}")
    except RemoteError as e:
        if e.kind == "recursion":
            verdicts.fail(f"attention_context {LOOPS}: it hit Python's recursion limit{what} (recursion is a loop "
                          f"too). {FIX}")
        raise verdicts.student_failure(e, f"attention_context{what}") from None
    finally:
        sub.deadline = saved
    after = bmm_time(sub, *inputs(*shape))
    here = here_time(alpha, enc)
    got, want = verdicts.tensor(got, f"the context{what}"), ref.context.attention_context(alpha, enc)
    if got.numel() == want.numel():  # a size-1 dimension squeezed away: the edge-size case charges that
        got = got.reshape(want.shape)
    util.close(got, want, f"the context{what}", "It is right at the usual sizes: compute the same thing at every size.")
    return spent, min(before, after), here


def early_pass(times: list[float], bmms: list[float], heres: list[float]) -> bool:
    """Clearly batched after the calls so far: more calls could only confirm it. Honest code measures 0.5 to 1.2
    after one call; a loop measures over 3 even against a bmm slowed to its bound (docs/threat-model.md), and an
    early pass needs the worker's bmm under that bound, so only a pass ends a round early, never a fail."""
    return min(bmms) < BOUND * min(heres) and ratio(min(times), min(bmms), min(heres)) < EARLY


def decided(value: float, limits: tuple[float, float, float], last: bool) -> bool | None:
    """Whether a measurement passes (True), fails (False) or must be taken again (None): only a borderline one is
    measured again, and the last round decides at the middle of the band, so one submission gets one verdict."""
    low, middle, high = limits
    if value < low or value > high:
        return value < low
    return value <= middle if last else None


def ratio(spent: float, bmm: float, here: float) -> float:
    """The student's time, less a call's own cost, as a multiple of the batched product's (bounded by the judge's)."""
    return max(spent - PER_CALL, 0.0) / min(bmm, BOUND * here)


@pytest.mark.points(2)
def test_it_runs_no_python_loop_over_positions(sub, ref):
    s = util.MAIN
    for T in (4, 32):  # the property is paid only when the values are right
        alpha, enc = inputs(s.B, T, s.H)
        got = verdicts.tensor(context_of(sub, alpha, enc), "context", (s.B, s.H))
        util.close(got, (alpha[..., None] * enc).sum(1), "context", util.see(WEIGHTED_SUM))
    check_gradients(sub, ref)  # one differentiable function of both inputs, as the reference is
    check_calls(sub, s.H)
    shapes = probe_shapes(sub.seed)
    times: dict[tuple, list[float]] = {shape: [] for shape in shapes}
    bmms: dict[tuple, list[float]] = {shape: [] for shape in shapes}
    heres: dict[tuple, list[float]] = {shape: [] for shape in shapes}
    for round_ in range(1, ROUNDS + 1):
        for _ in range(PAIRS):  # interleaved: every shape sees the same load on the machine
            for shape in shapes:
                spent, bmm, here = timed(sub, ref, shape)
                times[shape].append(spent)
                bmms[shape].append(bmm)
                heres[shape].append(here)
            if all(early_pass(times[s], bmms[s], heres[s]) for s in shapes):
                return
        ratios = {shape: ratio(min(times[shape]), min(bmms[shape]), min(heres[shape])) for shape in shapes}
        verdict = {shape: decided(ratios[shape], RATIO, round_ == ROUNDS) for shape in shapes}
        for shape, passed in verdict.items():
            if passed is False:
                verdicts.fail(f"attention_context {LOOPS}: for {sentences(shape)} it takes {ratios[shape]:.0f} "
                              f"times as long as one batched product. {FIX}")
        if all(verdict.values()):
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
