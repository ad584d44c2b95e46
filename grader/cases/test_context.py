"""Hidden cases for the `context` piece: attention_context."""
from __future__ import annotations

import io
import time
from typing import NamedTuple

import pytest
import torch

from grader.judge import verdicts
from grader.judge.workers import RemoteError, WorkerLost
from grader.worker import chain, wire
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
# could be forged), and symmetrically: a loop over the sentences loses as a loop over the positions does. What is
# measured is the CPU time the kernel accounts to the worker (grader.judge.cpuclock), which a busy machine does not
# change as it changes the wall clock. Three probes, drawn from the case's hidden seed, gradients on as in training:
# a few long sentences (a loop over the positions pays there), many short ones (a loop over the sentences pays
# there), and a chain of calls at a square shape, both sides a few hundred long, each call's input drawn from the
# answer before it (grader.worker.chain): a loop over either side, the shorter one included, pays there at every
# step, and no step can be worked out before the one before it; what a call of theirs costs whatever the sizes
# (checks, a debug print, printed briefly there) is measured on the same chain at a small square base shape and not
# charged, so the chain charges what grows with the sides. Each probe is measured beside a run of the same work by the
# batched product itself (torch.bmm, the worker's own trusted command, on other inputs of the same shape, so that no
# answer of its can be kept and given back as the student's): a batched product in any spelling
# costs about what bmm costs; a loop, however it is spelled (for, while, map or reduce, a comprehension, recursion,
# in torch, TorchScript, vmap, numpy or on Python floats), pays many times bmm's time at one of them. Code that
# slows the worker's own bmm to widen its margin gains at most BOUND times the judge's own CPU time for the same
# bytes and products. Every timed call has fresh inputs and its value is checked.
PAIRS, ROUNDS = 3, 4  # calls at each probe per round; rounds at most, while a measurement is borderline
# The limits, on the student's time as a multiple of bmm's (`ratio`), from the least of each time over the calls so
# far at one probe (below: passes, above: fails, in between: measured again, and after the last round the middle
# decides). The chain's middle is higher: its products are small beside its own work (the wire, the permutations),
# whose noise carries an honest call's figure up to about 2 (a numpy loop's: 6 to 7, a torch loop's: 16 to 21).
# tests/redteam/test_loops.py has what they were chosen from.
RATIO = {"single": (2.0, 3.0, 8.0), "chain": (2.0, 4.0, 8.0)}
# CPU seconds of a call's own cost (checks, a print of a shape) not counted against it: one call's at most, and a chained
# call's as measured at the chain's base shape, up to this
PER_CALL = 0.0005
PRINTING = 0.002  # a chained call's at most where the student's code printed (a brief tensor print: about 0.25 ms)
BOUND = {"single": 4.0, "chain": 1.0}  # bmm's time counts for at most this many times the judge's own (here_time)
EARLY = 1.5  # below this after any pair of calls (and bmm under its bound), a round ends at once: it passes
CALL_LIMIT = 2.5  # seconds one timed call may take before it is stopped (a torch loop takes about 1 s)
STEPS = 48  # calls in the chain
FIX = "Weight and sum every position of every sentence at once, with one batched product (torch.bmm)."
LOOPS = "runs a Python loop over the sentences or the positions"
IN_THE_GRAPH = ("The context must be one differentiable torch computation of alpha and encoder_outputs (no .detach(), "
                ".item(), .tolist(), .numpy() or tensors rebuilt from values): the decoder trains through it.")


class Probe(tuple):
    """(B, T_src, H) of one timed probe, and whether it is a chain of STEPS calls or one call; a chain's `base` is
    the small square shape where the student's own cost of a call is measured (what a loop over it costs is small)."""

    chain: bool
    base: Probe | None

    def __new__(cls, B: int, T: int, H: int, chain: bool = False, base: Probe | None = None) -> Probe:
        probe = super().__new__(cls, (B, T, H))
        probe.chain, probe.base = chain, base
        return probe

    @property
    def kind(self) -> str:
        return "chain" if self.chain else "single"


def probe_shapes(seed: int) -> tuple[Probe, Probe, Probe]:
    """The few long sentences, the many short ones and the chain's square shape (with its small base), drawn from the
    case's hidden seed."""
    g = torch.Generator().manual_seed(seed)

    def draw(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (1,), generator=g))

    H = draw(2, 4)
    long, short = Probe(draw(2, 4), draw(48_000, 80_000), H), Probe(draw(24_000, 40_000), draw(4, 8), H)
    base = Probe(draw(24, 40), draw(24, 40), 1, chain=True)
    return long, short, Probe(draw(192, 256), draw(192, 256), 1, chain=True, base=base)


def sentences(shape: tuple[int, int, int]) -> str:
    B, T, _ = shape
    said = f"{B} sentence{'s' if B > 1 else ''} of {T} position{'s' if T > 1 else ''}"
    return said + (f", in {STEPS} calls one after another" if getattr(shape, "chain", False) else "")


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


class Timing(NamedTuple):
    """One timed call at one probe, in CPU seconds: the worker's for the student's call (or chain), its own bmm's
    just before, the judge's for the same request (here_time) and for the products alone (taken at the probe's
    first call: the judge's own work, which the student's code cannot move)."""

    spent: float
    bmm: float
    here: float
    products: float
    base: float = 0.0  # a chain's: the student's time for the same chain at its small base shape
    base_bmm: float = 0.0  # and the worker's bmm's there
    printed: bool = False  # whether the student's call printed: then each chained call may be forgiven PRINTING


def here_time(probe: Probe, alpha, enc) -> tuple[float, float]:
    """The CPU seconds the judge itself takes for the work of the worker's bmm command on these inputs (the request
    written and read as the wire does, the products, the answers written and read back): a bound on the worker's
    time that code slowing the worker's own bmm cannot move; and for the products alone."""
    start = time.process_time()
    frame = io.BytesIO()
    torch.save(wire.encode([alpha, enc]), frame)
    a, e = wire.decode(torch.load(io.BytesIO(frame.getvalue()), weights_only=False))
    outs = chain.run(_bmm, a, e, STEPS, 0) if probe.chain else _bmm(a, e)
    answer = io.BytesIO()
    torch.save(wire.encode(outs), answer)
    torch.load(io.BytesIO(answer.getvalue()), weights_only=True)
    whole = time.process_time() - start
    start = time.process_time()
    for _ in range(STEPS if probe.chain else 1):
        _bmm(a, e)
    return whole, time.process_time() - start


def _bmm(alpha, enc):
    return torch.bmm(alpha.unsqueeze(1), enc).squeeze(1)


def request(probe: Probe, target: str) -> dict:
    """The worker command that runs `target` ("bmm" or the student's function) on one probe's inputs."""
    if probe.chain:
        return {"cmd": "chain", "target": target, "method": None, "steps": STEPS, "seed": 0}
    return {"cmd": "bmm"} if target == "bmm" else {"cmd": "call", "target": target, "method": None}


def bmm_time(sub, probe: Probe, alpha, enc) -> float:
    """The worker's CPU seconds for its own batched product on these inputs (same wire both ways)."""
    try:
        return sub.clocked(request(probe, "bmm"), (alpha, enc))[1]
    except RemoteError as e:  # only code that broke torch in its own worker gets here
        raise verdicts.student_failure(e, "the batched product beside attention_context") from None


def timed(sub, ref, probe: Probe, here: tuple[float, float] | None) -> Timing:
    """One call of attention_context (or one chain of them) timed on fresh inputs of `probe` (an answer kept from an
    earlier call cannot be timed) after one of the worker's bmm on inputs of its own; every answer checked. `here`:
    the judge's own times for the probe, measured here where None."""
    base = Timing(0.0, 0.0, 0.0, 0.0)
    if probe.base is not None:  # the student's own cost of a call, where a loop costs little: just before, same load
        base = timed(sub, ref, probe.base, (0.0, 0.0))
    seed = int(torch.randint(0, 2**31, (1,)))
    alpha, enc = inputs(*probe)
    what = f" for {sentences(probe)}"
    # bmm runs in the student's process: on the timed call's own inputs, its answer could be kept and returned as theirs
    bmm = bmm_time(sub, probe, *inputs(*probe))  # CPU time, which drifts little with the load: one beside each call
    saved = sub.deadline
    ours = time.monotonic() + CALL_LIMIT < saved  # else the case's own deadline comes first, and its timeout says so
    sub.deadline = min(saved, time.monotonic() + CALL_LIMIT)
    limit = sub.deadline
    printed = sub.printed
    try:
        got, spent = sub.clocked({**request(probe, "@attention_context"), "seed": seed}, (alpha, enc))
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
        sub.deadline = saved + (sub.deadline - limit)  # what the machine's load gave back stays given
    check_answers(ref, probe, alpha, enc, got, seed, what)
    return Timing(spent, bmm, *(here or here_time(probe, alpha, enc)), base=base.spent, base_bmm=base.bmm,
                  printed=sub.printed > printed)


def check_answers(ref, probe: Probe, alpha, enc, got, seed: int, what: str) -> None:
    """Each answer the reference's: a chain's on the permutation its previous answer, as the worker sent it, gives."""
    if probe.chain and (not isinstance(got, list) or len(got) != STEPS):
        verdicts.fail("the grader could not read the answers of the chained calls: something in the worker changed them.")
    previous = b""
    for raw in got if probe.chain else [got]:
        a = alpha.index_select(1, chain.permutation(previous, probe[1], seed)) if probe.chain else alpha
        out, want = verdicts.tensor(raw, f"the context{what}"), ref.context.attention_context(a, enc)
        if out.numel() == want.numel():  # a size-1 dimension squeezed away: the edge-size case charges that
            out = out.reshape(want.shape)
        util.close(out, want, f"the context{what}", "It is right at the usual sizes: compute the same thing at every size.")
        previous = chain.answer_bytes(raw)


def least(timings: list[Timing]) -> Timing:
    """Each time's least over the calls so far (what the machine added to a call is never less than nothing), and
    whether any of them printed."""
    *times, printed = zip(*timings)
    return Timing(*(min(column) for column in times), printed=any(printed))


def ratio(probe: Probe, t: Timing) -> float:
    """The student's time as a multiple of the batched product's, bmm's counted at most BOUND times the judge's own.

    One call: the whole request's, less PER_CALL. A chain: the student's time beyond the whole bmm chain's and beyond
    what the same chain cost them beyond bmm's at its small base shape (their checks or prints, the same at every size,
    where a loop's cost grows with the side it runs over; forgiven up to PER_CALL a call, PRINTING where it printed),
    over the products alone (the judge's), plus one, so the chain's own work (the wire, the permutations), which a
    fast answer shares with a loop, does not hide a loop's cost."""
    bmm = min(t.bmm, BOUND[probe.kind] * t.here)
    if probe.chain:
        allowed = min(max(t.base - t.base_bmm, 0.0), (PRINTING if t.printed else PER_CALL) * STEPS)
        return max(t.spent - allowed - bmm, 0.0) / t.products + 1.0
    return max(t.spent - PER_CALL, 0.0) / bmm


def early_pass(probe: Probe, t: Timing) -> bool:
    """Clearly batched after the calls so far: more calls could only confirm it. Only a pass ends a round early, never
    a fail, and an early pass needs the worker's bmm under its bound (docs/threat-model.md)."""
    return t.bmm < BOUND[probe.kind] * t.here and ratio(probe, t) < EARLY


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
    check_calls(sub, s.H)
    probes = probe_shapes(sub.seed)
    seen: dict[Probe, list[Timing]] = {probe: [] for probe in probes}
    for round_ in range(1, ROUNDS + 1):
        for _ in range(PAIRS):  # interleaved: every probe sees the same load on the machine
            for probe in probes:
                first = seen[probe][0] if seen[probe] else None
                seen[probe].append(timed(sub, ref, probe, (first.here, first.products) if first else None))
            if all(early_pass(p, least(seen[p])) for p in probes):
                return
        ratios = {p: ratio(p, least(seen[p])) for p in probes}
        verdict = {p: decided(ratios[p], RATIO[p.kind], round_ == ROUNDS) for p in probes}
        for p, passed in verdict.items():
            if passed is False:
                verdicts.fail(f"attention_context {LOOPS}: for {sentences(p)} it takes {ratios[p]:.0f} "
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
