"""Train and read a submission's two models for the plots, with every line of student code in a jailed worker.

This process is trusted and runs no student code: like a judge, it builds the student's Seq2SeqAttn (their
encoder, additive attention, context and decoder) and Luong's decoder around their LuongDotAttention in
workers (grader.worker), has them train with the lab's loop there, and decodes every sentence itself,
asking the worker for one forward_step at a time. Only data comes back.
"""
from __future__ import annotations

import dataclasses
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from grader.runner import layout
from grader.lab import toy
from grader.lab import train
from grader.judge.workers import LoadError, RemoteError, WorkerLost, Output
from grader.judge.sources import lab_sources
from grader.judge.remote import RemoteSeq2Seq, PieceWorker, CaseHandle
from grader.judge.workers import worker_server
from grader.judge.sources import relative_imports
from grader.core.files import MAX_PIECE, TOO_BIG, read_untrusted, untrusted_text
from grader.core.pieces import PIECES, run_order

# the modules the plots' models are built from (the registry's `plots`), in dependency order; evaluation.py is never
# loaded, the trusted evaluator stands in for it
LOADED = [p for p in run_order(list(PIECES)) if PIECES[p].plots]
PROGRESS_EVERY = 200


class PlotError(Exception):
    """Making the plots failed; str() is one line for the user: what went wrong and what to try."""


@dataclasses.dataclass
class Trained:
    """What the plots draw of one model: its accuracy by length, the heatmap sentence's words and weights."""

    steps: int
    acc: dict[int, float]
    said: list[str]
    wrong: list[int]
    alpha: object  # (T_tgt - 1, T_src) tensor


def _files(submission: Path, forced: dict[str, str]) -> tuple[dict[str, str], list[str], list[str]]:
    """({stem: source}, the stems that are the student's own, notes): the reference stands in for a missing file
    or one whose piece still raises NotImplementedError (`forced`)."""
    reference = layout.current().reference
    texts, own, notes = {}, [], []
    for stem in LOADED:
        path = submission / f"{stem}.py"
        why = forced.get(stem)
        if why is None:
            got = read_untrusted(path, MAX_PIECE)
            text = untrusted_text(got)
            if text is not None:
                texts[stem] = text
                own.append(stem)
                continue
            # a link, a folder or a FIFO is no file of theirs to train, as staging refuses it for grading
            why = f"{path.name} is over {MAX_PIECE // 1024} KB" if got.refused == TOO_BIG else f"{path.name} is missing"
        if reference is None:  # a student release without the seal key holds no reference to stand in
            raise PlotError(f"{why}, and this checkout has no reference to stand in for it; write it first "
                            "(`grade` shows which pieces pass)")
        texts[stem] = (reference / f"{stem}.py").read_text(encoding="utf-8")
        notes.append(f"{why}; the plots use the reference {stem}")
    return texts, own, notes


def _sources(texts: dict[str, str], stem: str) -> list[tuple[str, str]]:
    """`stem`'s file last, after the modules it imports (in LOADED's order), as a worker loads them."""
    need, todo = set(), [stem]
    while todo:
        for other in relative_imports(texts[todo.pop()]):
            if other in texts and other not in need:
                need.add(other)
                todo.append(other)
    return [(m, texts[m]) for m in LOADED if m in need and m != stem] + [(stem, texts[stem])]


def _fail(e: BaseException, what: str, timeout: float) -> PlotError:
    if isinstance(e, WorkerLost) and e.timed_out:
        return PlotError(f"making the plots ran past {timeout:g} s and was stopped; check that your model trains "
                         "(`grade decoder`) or allow more time")
    if isinstance(e, RemoteError):
        if e.kind == "not_implemented":
            return PlotError(f"{e}; finish that function first (`grade` shows which pieces pass)")
        return PlotError(f"your {what} raised {e.type_name}: {str(e)[:160]}{e.where}; `grade` shows the piece at fault")
    if isinstance(e, WorkerLost):
        return PlotError(f"the process running your {what} {e}; `grade` shows the piece at fault")
    return PlotError(f"your {what}: {str(e)[:200]}")


def _progress(name: str, step: int, total: int, start: float) -> None:
    seconds = time.perf_counter() - start
    # an estimate, never a bound: this run's own time per step so far, which a machine that gets busier slows
    # (a bound that held at load 10 would be many times this); the early stop may end it sooner
    left = (total - step) * seconds / max(step, 1)
    print(f"plots: {name} step {step}/{total}  {seconds:.0f} s, about {left:.0f} s of training left at this "
          "machine's speed so far (an estimate)", file=sys.stderr, flush=True)


def _train_and_read(sub: CaseHandle, model, name: str, cfg: train.TrainConfig, sentence: tuple) -> Trained:
    """Train `model` (a worker handle) with the lab's loop to the stop rule, decoding validation here; then the
    test split's accuracy by length and the heatmap sentence's greedy decode."""
    from grader.lab import evaluate

    remote = RemoteSeq2Seq(model, len(toy.TGT_ITOS))
    valid, fields = cfg.valid_pairs(), {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    start, step, shown = time.perf_counter(), 0, 0
    while step < cfg.max_steps:
        step = model.train_steps(fields, cfg.eval_every - step % cfg.eval_every)
        if type(step) is not int:
            raise PlotError(f"training your {name} model did not report its step count")
        if step - shown >= PROGRESS_EVERY or step >= cfg.max_steps:
            shown = step
            _progress(name, step, cfg.max_steps, start)
        if cfg.met(evaluate.accuracy_by_length(remote, valid)):
            break
    print(f"plots: trained {name} {step} steps in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    print(f"plots: evaluating your {name} model on the test split", file=sys.stderr, flush=True)
    acc = evaluate.accuracy_by_length(remote, toy.read_split("test"))
    batch = toy.encode([sentence])
    pred, alpha = evaluate.greedy(remote, batch)  # (1, T_tgt - 1), (1, T_tgt - 1, T_src)
    said = [toy.TGT_ITOS[i] for i in pred[0].tolist()]
    wrong = [i for i, (p, g) in enumerate(zip(pred[0].tolist(), batch.tgt[0, 1:].tolist())) if p != g]
    return Trained(step, acc, said, wrong, alpha[0])


def train_both(submission: Path, cfgs: dict[str, train.TrainConfig], sentence: tuple, timeout: float,
               memory_gb: float) -> tuple[dict[str, Trained], list[str], list[str]]:
    """Both models trained and read in jailed workers within `timeout` seconds; a piece still raising
    NotImplementedError is swapped for the reference's (where this checkout has one) and the run retried.
    Returns the models, the notes on what stood in, and the stems that were the student's own."""
    deadline = time.monotonic() + timeout
    forced: dict[str, str] = {}
    while True:
        texts, own, notes = _files(submission, forced)
        try:
            return _run(texts, own, cfgs, sentence, deadline, memory_gb), notes, own
        except RemoteError as e:
            stem = _stub_piece(str(e))
            if e.kind != "not_implemented" or stem is None or stem not in own or stem in forced:
                raise _fail(e, "model", timeout) from None
            forced[stem] = f"{stem}.py is not finished yet ({str(e)[:120]})"
        except LoadError as e:
            stem = next((s for s in own if f"{s}.py" in str(e)), None)
            if stem is None or stem in forced:
                raise PlotError(f"{e}; fix it first (`grade` shows the piece at fault)") from None
            forced[stem] = str(e)[:200]
        except WorkerLost as e:
            raise _fail(e, "model", timeout) from None


def _stub_piece(message: str) -> str | None:
    found = re.search(r"piece '(\w+)'", message)
    return PIECES[found.group(1)].module if found and found.group(1) in PIECES else None


def _build(sub: CaseHandle, name: str, cfg: train.TrainConfig):
    """The model, built in the worker right after seeding it with the schedule's seed, as the graded cases do."""
    sub.seed_worker(cfg.seed)
    sizes = (len(toy.SRC_ITOS), len(toy.TGT_ITOS), cfg.embed_dim, cfg.hidden_dim)
    if name == "Bahdanau":
        return sub.new("Seq2SeqAttn", *sizes)
    attn = sub.new("LuongDotAttention")
    return sub.new("@lab:luong_model.Seq2SeqLuong", *sizes, sub.ref(attn.name))


def _run(texts: dict[str, str], own: list[str], cfgs: dict[str, train.TrainConfig], sentence: tuple,
         deadline: float, memory_gb: float) -> dict[str, Trained]:
    from grader.lab import evaluate

    server = worker_server(None)
    output = Output()
    cpu = int(max(60.0, deadline - time.monotonic())) + 60
    subs: dict[str, CaseHandle] = {}
    try:
        for name, stem in (("Bahdanau", "decoder"), ("Luong", "luong")):  # the piece whose training case trains it
            slot = PieceWorker(server, _sources(texts, stem), stem, f"{stem}.py", output, memory_gb, cpu,
                        lab=lab_sources(PIECES[stem].lab), own=tuple(s for s in own if s != stem))
            subs[name] = CaseHandle(slot, cfgs[name].seed, deadline)
        # both run once before either trains: an unfinished piece is found (and swapped) in seconds, not minutes
        batch = toy.encode(toy.read_split("valid")[:4])  # source lengths 1..4: cheap, with pads
        for name, sub in subs.items():
            model = _build(sub, name, cfgs[name])
            model.call("__call__", batch.src, batch.src_mask, batch.tgt, grad=False)
            evaluate.greedy(RemoteSeq2Seq(model, len(toy.TGT_ITOS)), batch)
        # rebuilt from the seed: the plots train from scratch, as the lesson does. The two models train
        # side by side, each worker on one thread as the graded cases train, so their numbers do not depend on it.
        models = {name: _build(sub, name, cfgs[name]) for name, sub in subs.items()}
        torch.set_num_threads(1)  # this process decodes for both at once

        def one(name: str) -> Trained:
            return _train_and_read(subs[name], models[name], name, cfgs[name], sentence)

        with ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
            done = {name: pool.submit(one, name) for name in subs}
        return {name: future.result() for name, future in done.items()}
    finally:
        for sub in subs.values():
            sub.close()
            sub.slot.close()
        server.close()
        # Luong's worker holds the lab's baseline encoder and decode loop, and the Bahdanau worker the reference of
        # any piece that stood in: what they print could carry that code, so it is withheld as grading withholds it
        if output.text().strip():
            print("plots: what your code printed is withheld: these workers hold the lab's own encoder and decode "
                  "loop (and the reference's pieces that stood in), which it could copy; `grade` shows a piece's "
                  "prints where its worker holds none", file=sys.stderr, flush=True)
