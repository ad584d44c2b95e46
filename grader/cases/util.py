"""Shared inputs for the hidden cases: seeded random sizes and tensors that never make B = T = H."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

import pytest
import torch

from grader.judge import verdicts, withhold
from grader.lab import evaluate
from grader.lab import toy
from grader.lab import train
from grader.judge.workers import RemoteError


@dataclass(frozen=True)
class Sizes:
    B: int
    T: int  # T_src
    E: int
    H: int
    V: int


# each function's arguments and results as its docstring names them (tests/grading/test_verdicts.py reads them off
# reference/): what a shape error raised in it ends with (verdicts.shape_line)
verdicts.SIGNATURES.update({
    "EncoderAll": "src (B, T_src) and returns outputs (B, T_src, H) and (h, c), each (1, B, H)",
    "BahdanauAttention": "encoder_outputs (B, T_src, H), decoder_state (B, H) and src_mask (B, T_src), and returns "
                         "context (B, H) and alpha (B, T_src)",
    "attention_context": "alpha (B, T_src) and encoder_outputs (B, T_src, H), and returns context (B, H)",
    "LuongDotAttention": "encoder_outputs (B, T_src, d), decoder_state (B, d) and src_mask (B, T_src), and returns "
                         "context (B, d) and alpha (B, T_src)",
    "forward_step": "y_prev (B, 1), state (h_prev, c_prev) each (B, H), encoder_outputs (B, T_src, H) and src_mask "
                    "(B, T_src), and returns logits (B, V_tgt), (h, c) each (B, H) and alpha (B, T_src)",
    "Seq2SeqAttn": "src (B, T_src), src_mask (B, T_src) and tgt (B, T_tgt), and returns logits (B, T_tgt - 1, V_tgt) "
                   "and alpha (B, T_tgt - 1, T_src)",
    "greedy_decode": "src (B, T_src), src_mask (B, T_src) and sos (B, 1), and returns tokens (B, steps) and alpha "
                     "(B, steps, T_src)",
    "accuracy_by_length": "src (B, T_src), src_mask (B, T_src) and tgt (B, T_tgt)",
})

MAIN = Sizes(B=3, T=7, E=5, H=6, V=11)
SINGLE_SENTENCE = Sizes(B=1, T=5, E=4, H=7, V=9)
SINGLE_TOKEN = Sizes(B=4, T=1, E=3, H=5, V=8)
EDGES = [pytest.param(SINGLE_SENTENCE, id="B=1"), pytest.param(SINGLE_TOKEN, id="T_src=1")]


def lengths(s: Sizes) -> torch.Tensor:
    """Real source lengths: the first row is full, the others shorter, so every batch has pads."""
    n = torch.randint(1, s.T + 1, (s.B,))
    n[0] = s.T
    return n


def mask_for(n: torch.Tensor, T: int, device: str | torch.device = "cpu") -> torch.Tensor:
    return torch.arange(T, device=device)[None, :] < n.to(device)[:, None]  # (B, T) True at real tokens


def src_ids(s: Sizes, n: torch.Tensor) -> torch.Tensor:
    ids = torch.randint(1, s.V, (s.B, s.T))
    return ids.masked_fill(~mask_for(n, s.T), 0)


def build(sub, cls: str, *args, what: str | None = None):
    """The student's class `cls` built in the worker with `args`; a handle to it."""
    return verdicts.call(sub.new, cls, *args, what=f"{what or cls}(...) constructor")


def holding(sub, r: torch.nn.Module, cls: str, *args):
    """The student's class `cls` built in the worker with `args`, holding the weights of `r`, the reference's."""
    m = build(sub, cls, *args)
    verdicts.copy_weights(m, r, cls)
    return m


def see(case: str) -> str:
    """The pointer a case gives when its own check cannot name the cause: the case (its title in the report) that can."""
    return f"See the case '{case}' for the cause."


def close(actual: torch.Tensor, expected: torch.Tensor, what: str, hint: str, **tol) -> None:
    """verdicts.close, with the hint also for NaN or inf: a case's hint names the cause whatever the wrong values are."""
    verdicts.tensor(actual, what, tuple(expected.shape), expected.dtype)
    verdicts.finite(actual, what, hint)
    verdicts.close(actual, expected, what, hint, **tol)


def edge_sizes(what: str, got: tuple, want: tuple, usual, matches: str, squeeze: str = "") -> None:
    """An edge-size case for an attention module: (context, alpha) against the reference's (see right_at_the_edge)."""
    (context, alpha), (rc, ra) = got, want
    right_at_the_edge(what, {"alpha": (alpha, ra), "context": (context, rc)}, usual, matches, squeeze)


def right_at_the_edge(what: str, compared: dict[str, tuple], usual, matches: str, squeeze: str = "") -> None:
    """The end of an edge-size case: each of `compared` ({name: (got, want)}) against the reference's, in order.
    Code that is also wrong at the usual sizes (`usual()` fails) is sent to the case `matches`, which names the
    cause; code right there but wrong here gets the size-1 hint, `squeeze` naming the dimension to squeeze."""
    if not all(verdicts.is_close(got, want) for got, want in compared.values()) and not right_elsewhere(usual):
        verdicts.fail(f"{what} differs from the reference at the usual sizes too, not only at this one. " + see(matches))
    edge = ("The values are right at the usual sizes but not when a dimension has size 1: squeeze only the "
            f"dimension you added{squeeze}, not every size-1 dimension.")
    for name, (got, want) in compared.items():
        close(got, want, name, edge)


def attention_at_the_edge(attend, want: tuple, usual, what: str, matches: str, squeeze: str = "") -> None:
    """An attention module's edge-size case: `attend()` (its (context, alpha) at an edge size, checked for shape)
    against `want`, the reference's; a raise there is named by at_size_one, a wrong value by edge_sizes."""
    got = at_size_one(attend, usual, f"{what}.forward")
    edge_sizes(what, got, want, usual, matches, squeeze)


def right_elsewhere(check) -> bool:
    """Whether `check()` (the same computation on the usual sizes) passes: an edge-size case blames the edge size
    only when the code is right elsewhere, and otherwise sends the student to the case that names the cause."""
    try:
        check()
    except verdicts.CaseFailure:
        return False
    return True


def cuda_or_skip() -> torch.device:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here; this case runs where one is present")
    return torch.device("cuda")


def cuda_matches_cpu(run, what: str, note: str = "") -> None:
    """The point-free case on a real GPU: `run(device)` gives (the student's result computed on that CUDA device,
    the reference's on the CPU), `what` (and `note`, after "on CUDA") naming it. Skipped before anything is built
    where no GPU is: the points are decided by the device case, on its stand-in device, the same everywhere."""
    dev = cuda_or_skip()
    got, want = run(dev)
    verdicts.close(got.cpu(), want, f"{what} on CUDA{note}", "CUDA and CPU disagree.", atol=1e-4, rtol=1e-3)


def decoded_accuracy(model, pairs: list, what: str) -> dict[int, float]:
    """The trusted evaluator's greedy accuracy of `model`, a model here in the judge (or a worker's, asked step by step)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the judge decodes beside a training worker that has one core
    try:
        with torch.no_grad():
            return evaluate.accuracy_by_length(model, pairs)
    except RemoteError as e:
        raise verdicts.student_failure(e, f"{what}, while the grader decoded with it") from None
    except (TypeError, ValueError, IndexError, AttributeError, RuntimeError) as e:
        said = withhold.hide(f"{type(e).__name__}: {str(e)[:200]}", type(e).__name__)  # it may quote an answer
        verdicts.fail(f"decoding with {what} after training failed ({said}); forward_step "
                    "must return (logits, state, alpha) as documented.")
    finally:
        torch.set_num_threads(threads)


def trained_copy(model, judge: torch.nn.Module, what: str, layout_hint: str) -> torch.nn.Module:
    """`judge` (the lab's architecture, built here) holding the parameters the worker trained into `model`.

    The worker only takes training steps: what it answers about decoding, or about its own progress, could be
    anything its code likes, so the accuracy is decoded here, from its parameters alone."""
    state = verdicts.call(model.state, what=f"reading {what}'s trained parameters")
    want = judge.state_dict()
    if not isinstance(state, dict) or set(state) != set(want):
        verdicts.fail(f"{what}'s trained parameters are not the lab's layout; {layout_hint}.")
    for name, ref in want.items():
        got = state[name]
        if (not isinstance(got, torch.Tensor) or got.layout != torch.strided or got.device.type != "cpu"
                or got.dtype != ref.dtype or got.shape != ref.shape):
            verdicts.fail(f"{what}'s trained parameter {name!r} is not a {ref.dtype} CPU tensor of shape "
                        f"{tuple(ref.shape)}; {layout_hint}.")
    judge.load_state_dict(state)
    return judge.eval()


PROGRESS_STEPS = 50  # training steps between two progress lines (a chunk costs a round trip, not a decode)


def graded_training(model, cfg: train.TrainConfig, warm: dict, what: str, layout_hint: str, judge: torch.nn.Module,
                    progress=None) -> float:
    """Load the warm-start parameters into `model` (a worker handle), train it with the trusted schedule
    until the stop rule, and return the greedy token accuracy on the test sentences of length 30 of `judge`
    (the lab's architecture, here in the judge) holding the trained parameters.
    progress(step=, max_steps=, acc=, seconds=) hears of every chunk, for the parent's display."""
    import time

    start = time.perf_counter()
    lacks = verdicts.call(model.load, warm, False, what="loading the lab's trained parameters")
    if not isinstance(lacks, list) or lacks:
        lacked = withhold.hide(repr(str(lacks[0] if isinstance(lacks, list) else lacks)[:80]),  # the worker's text
                               "some of the lab's parameters")
        verdicts.fail(f"{what} lacks {lacked}; {layout_hint}.")
    valid = cfg.valid_pairs()
    fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    step = 0
    while step < cfg.max_steps:
        # chunks of at most PROGRESS_STEPS, so the display moves; the stop rule decodes at eval_every only
        chunk = min(cfg.eval_every - step % cfg.eval_every, cfg.max_steps - step, PROGRESS_STEPS)
        done = verdicts.call(model.train_steps, fields, chunk, what=f"training {what}")
        if type(done) is not int or done != step + chunk:  # the loop ends only if the steps are taken
            said = withhold.hide(f"step {str(done)[:20]}", "another step")
            verdicts.fail(f"the training run reported {said} after {step} + {chunk} steps; the lab's "
                        "training loop takes every step it is asked for, so something in the worker changed it.")
        step = done
        if step % cfg.eval_every and step < cfg.max_steps:
            if progress:
                progress(step=step, max_steps=cfg.max_steps, seconds=time.perf_counter() - start)
            continue
        acc = decoded_accuracy(trained_copy(model, judge, what, layout_hint), valid, what)
        if progress:
            progress(step=step, max_steps=cfg.max_steps, acc=acc[cfg.target_len], seconds=time.perf_counter() - start)
        if cfg.met(acc):
            break
    test30 = [p for p in toy.read_split("test") if len(p[0]) == 30]
    return decoded_accuracy(judge, test30, what)[30]


# ---- the device cases: a stand-in CUDA device (grader.worker.standin_cuda), the same on every machine ----

MIXED = "Expected all tensors to be on the same device"  # torch's words (and the stand-in's) for a mixed operation
INDICES = "indices should be either on cpu or on the same device as the indexed tensor"  # a CPU tensor, device indices
LENGTHS = "'lengths' argument should be a 1D CPU int64 tensor"  # pack_padded_sequence's lengths on the device
NEW_TENSORS = "create the tensors forward makes on the inputs' device (device=src.device, zeros_like, new_zeros)"
SAME_EVERYWHERE = ("The values on a CUDA device differ from those on the CPU: compute the same way on every device "
                   "(no branch on x.device or x.is_cuda).")
PACKING = "; only pack_padded_sequence's lengths stay on the CPU (lengths.cpu())"


def on_device(handle, *args, method: str | None = None, what: str, hint: str, names: dict[tuple, str]):
    """The results of `handle` (a module, or a function: sub.fn) called on `args` on a CUDA device, as CPU tensors
    for the case to compare with the reference; fails with `hint` when an operation mixed a tensor on the CPU with
    the inputs, or when one of `names` ({path in the result: name}) came back off the device.

    The device is the worker's stand-in (grader.worker.standin_cuda): the inputs and the module's parameters say they are
    on cuda:0 and hold real values, every operation is checked as CUDA checks it, and no GPU is needed, so the
    point is decided the same on every machine. Code that special-cases a device (`if x.device.type == "meta"`)
    gains nothing: the stand-in is not meta, and its values are compared with the reference's."""
    try:
        out = handle.probe(*args, method=method)
    except RemoteError as e:
        if LENGTHS in str(e):
            verdicts.fail(f"on a CUDA device, {what} gave pack_padded_sequence its lengths on the device"
                          f"{withhold.where(e.where)}, which torch refuses (\"{LENGTHS}\"): "
                          f"{PACKING.removeprefix('; ')}.")
        if MIXED in str(e) or INDICES in str(e):
            verdicts.fail(f"on a CUDA device, {what} mixed a tensor made on the CPU with the inputs"
                          f"{withhold.where(e.where)}: {hint}.")
        raise verdicts.student_failure(e, f"{what}, on a CUDA device,") from None
    if not isinstance(out, dict) or not {"values", "devices"} <= set(out):
        verdicts.fail(f"the grader could not read {what}'s results on a CUDA device.")
    for path, name in names.items():
        where = out["devices"]
        for i in path:
            where = where[i] if isinstance(where, (tuple, list)) and len(where) > i else None
        if isinstance(where, str) and where != "cuda":  # None: not a tensor there, which the case's checks name
            place = "the CPU" if where == "cpu" else "another device"
            verdicts.fail(f"on a CUDA device, {what} returned {name} on {place}, not on the inputs' device: {hint}.")
    return out["values"]


class Out(NamedTuple):
    """One result the device case compares: its name in the messages, where it sits in the result ((1,): the
    second of a pair; (): the result itself), the reference's value, and how to compare (close, or a piece's own)."""
    name: str
    at: tuple
    want: torch.Tensor
    compare: Callable = close


def right_on_the_cpu(compared: dict[str, tuple], cause: str) -> None:
    """The device case's first check, {name: (got, want)} on the CPU: device-agnostic code is right there first,
    and a mistake there is named by the case `cause`, not by this one."""
    for name, (got, want) in compared.items():
        close(got, want, f"{name} on the CPU", "Device-agnostic code must first be right on the CPU. " + see(cause))


def same_on_a_device(handle, *args, what: str, outs: Sequence[Out], result=None, hint: str = NEW_TENSORS) -> None:
    """The device case's second check: `handle` (a fresh module, or sub.fn(...): the probe moves it) called on
    `args` on the stand-in CUDA device returns each of `outs` on the device (checked in the result's order) with the
    reference's values (compared in the order of `outs`). `result` checks the result's form and gives it back
    (verdicts.pair, ...); `hint` is what to do about a tensor left on the CPU."""
    names = {o.at: o.name for o in sorted(outs, key=lambda o: o.at)}
    values = on_device(handle, *args, what=what, hint=hint, names=names)
    values = result(values) if result else values
    for o in outs:
        got = values
        for i in o.at:
            got = got[i]
        o.compare(got, o.want, f"{o.name} on a CUDA device", SAME_EVERYWHERE)


# ---- edge sizes: code right at the usual sizes that raises at B = 1 or T_src = 1 ----

SQUEEZE = ("is right at the usual sizes but raises at size 1: squeeze() without a dimension drops the batch at B = 1 "
           "and the source positions at T_src = 1; squeeze only the dimension you added (squeeze(1), squeeze(-1))")


def at_size_one(fn, usual, what: str):
    """fn() (a call at an edge size); when the student's code raises there but `usual()` (the same check at the usual
    sizes) passes, the failure names squeeze() without a dimension, the usual cause."""
    try:
        return fn()
    except verdicts.CaseFailure as e:
        if not isinstance(e.__context__, RemoteError) or e.__context__.kind != "error" or not right_elsewhere(usual):
            raise
        verdicts.fail(f"{what} {SQUEEZE}. It raised: {e}")
