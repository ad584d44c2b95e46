"""Red team, round two, what a channel between workers could still carry: the schedule leaves it nothing to earn.

State the machine keeps (the page cache) outlives a worker and is shared by workers that run at once. So every
piece's unit cases start only once the pieces whose reference its worker holds have ended, two pieces at a time
(the timed one alone); the training cases run only once the unit cases they need passed; and a unit run holds
no lab training code. The fast tests replace the runs by a log of them.
"""
from __future__ import annotations

import threading
import time

import pytest
import torch

from helpers import POINTS, REFERENCE, TOTAL, grade_dict, make_submission, scores
from grader.core.host import StartError
from grader.lab import train
from grader.core.pieces import PIECES, run_order
from grader.runner import schedule
from grader.runner.launch import selected
from grader.runner.results import CaseResult, Limits, PieceRun
from grader.verbs import batch

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

FULL = Limits(case_timeout=30, piece_timeout=600, memory_gb=6)


class Log:
    """A stand-in for run_piece: every case passes unless listed in `fail`; records who ran beside whom."""

    def __init__(self, fail: set[str] = frozenset()) -> None:
        self.fail, self.events, self.running, self.lock = set(fail), [], set(), threading.Lock()
        self.overlaps: list[tuple[tuple, tuple]] = []
        self.timeline: list[tuple[str, tuple]] = []  # ("start" | "end", run), in the order they happened

    def __call__(self, piece, expected, submission, ref, seed, limits, judge_server, cases, on_progress=None,
                 part="all"):
        me = (submission.name, piece, part)
        with self.lock:
            self.overlaps += [(me, other) for other in self.running]
            self.running.add(me)
            self.events.append(me)
            self.timeline.append(("start", me))
        time.sleep(0.02)
        with self.lock:
            self.running.discard(me)
            self.timeline.append(("end", me))
        chosen = selected(expected, limits, part)
        return PieceRun(piece, [CaseResult(c["case"], c["points"], c["case"] not in self.fail, "") for c in chosen])


class NoJudgeServer:
    def alive(self) -> bool:
        return True

    def twin(self, trains: bool = False) -> NoJudgeServer:
        return NoJudgeServer()

    def close(self) -> None:
        pass


@pytest.fixture
def log(monkeypatch):
    def install(fail=frozenset()) -> Log:
        fake = Log(fail)
        monkeypatch.setattr(schedule, "run_piece", fake)
        monkeypatch.setattr(schedule, "JudgeServer", NoJudgeServer)
        monkeypatch.setattr(batch, "JudgeServer", NoJudgeServer)
        monkeypatch.setattr(schedule, "FORK_SERVERS", True)
        return fake
    return install


def holds(piece: str) -> set[str]:
    """The pieces whose reference a piece's worker holds: its module's imports, and theirs."""
    by_module = {p.module: p.name for p in PIECES.values()}
    out: set[str] = set()
    for line in PIECES[piece].imports:
        dep = by_module[line.split()[1].lstrip(".")]
        out |= {dep} | holds(dep)
    return out


def answers(piece: str) -> set[str]:
    """The pieces whose answer a unit worker of `piece` holds: what it imports, but none where it gets their stubs
    (the evaluation piece: tests/worker/test_imports.py)."""
    return set() if PIECES[piece].stubbed else holds(piece)


def test_every_piece_runs_after_the_pieces_whose_reference_its_worker_holds():
    order = run_order(list(PIECES))
    assert sorted(order) == sorted(PIECES)
    for i, piece in enumerate(order):
        assert holds(piece) <= set(order[:i]), (piece, order)
    assert order.index("context") < order.index("additive") < order.index("decoder")


def test_a_grade_starts_no_unit_run_before_the_pieces_its_worker_holds_have_ended_and_times_one_piece_alone(
        log, tmp_path):
    fake = log()
    sub = make_submission(tmp_path / "alice")
    runs = schedule.grade(submission=sub, pieces=list(PIECES), seed="0", limits=FULL)
    units = [e for e in fake.events if e[2] == "units"]
    assert sorted(e[1] for e in units) == sorted(PIECES)
    for kind, (_, piece, part) in fake.timeline:
        if kind == "start" and part == "units":
            ended = {e[1] for k, e in fake.timeline[:fake.timeline.index((kind, (sub.name, piece, part)))]
                     if k == "end" and e[2] == "units"}
            assert answers(piece) <= ended, (piece, answers(piece) - ended)
    first_training = min(i for i, e in enumerate(fake.events) if e[2] == "training")
    assert all(e[2] == "units" for e in fake.events[:first_training])
    assert {e[1] for e in fake.events if e[2] == "training"} == {"luong", "decoder"}
    beside = [(a, b) for a, b in fake.overlaps if "units" in (a[2], b[2])]
    assert beside, "the unit runs use both lanes"
    for a, b in beside:
        assert a[2] == b[2] == "units"
        assert not (PIECES[a[1]].timed or PIECES[b[1]].timed), (a, b)
        assert a[1] not in answers(b[1]) and b[1] not in answers(a[1]), (a, b)
    assert [r.name for r in runs] == list(PIECES)
    assert sum(c.points for r in runs for c in r.cases if c.passed) == TOTAL


def test_a_training_case_whose_needed_unit_cases_failed_is_not_run_and_says_which_to_fix(log, tmp_path):
    fake = log({"test_the_model_matches_the_reference_under_teacher_forcing"})
    runs = {r.name: r for r in schedule.grade(submission=make_submission(tmp_path / "bob"), pieces=list(PIECES),
                                           seed="0", limits=FULL)}
    assert ("bob", "decoder", "training") not in fake.events
    assert ("bob", "luong", "training") in fake.events
    trained = next(c for c in runs["decoder"].cases if c.name.startswith("test_trained"))
    assert not trained.passed and trained.points == 5
    assert "not run" in trained.message and "the model matches the reference under teacher forcing" in trained.message
    assert [c.name for c in runs["decoder"].cases][-1] == trained.name  # the manifest's order


def test_a_batch_runs_every_students_unit_cases_piece_by_piece_before_any_training(log, tmp_path):
    fake = log()
    subs = [make_submission(tmp_path / "class" / name) for name in ("ann", "ben", "cat")]
    graded, bad = batch.main(submissions=subs, out=tmp_path / "book.csv", reports=None, jobs=2, seed="0",
                             limits=FULL, progress=False)
    assert (graded, bad) == (3, 0)
    pieces = [e[1] for e in fake.events if e[2] == "units"]
    order = run_order(list(PIECES))
    assert pieces == [p for p in order for _ in subs]  # every student's encoder, then every student's context, ...
    first_training = min(i for i, e in enumerate(fake.events) if e[2] == "training")
    assert all(e[2] == "units" for e in fake.events[:first_training])
    for a, b in fake.overlaps:  # side by side: the same piece's units, or two training runs
        assert (a[2] == b[2] == "training") or (a[1:] == b[1:]), (a, b)
    assert str(TOTAL) in (tmp_path / "book.csv").read_text()


def test_a_batch_grades_its_class_in_waves_each_piece_by_piece_and_trained_before_the_next_begins(
        log, monkeypatch, tmp_path):
    fake, who = log(), []

    def noted(piece, expected, submission, *args, **kwargs):
        who.append(submission.parent.name)  # the student's staging folder, named after their place in the class
        return fake(piece, expected, submission, *args, **kwargs)

    monkeypatch.setattr(schedule, "run_piece", noted)
    subs = [make_submission(tmp_path / "class" / name) for name in ("ann", "ben", "cat", "dan", "eve")]
    assert batch.main(submissions=subs, out=tmp_path / "book.csv", reports=None, jobs=1, seed="0", limits=FULL,
                      progress=False) == (5, 0)
    waves = [range(i, min(i + batch.WAVE, len(subs))) for i in range(0, len(subs), batch.WAVE)]  # -j 1
    assert [len(w) for w in waves] == [2, 2, 1]
    want = [e for wave in waves for e in [*((str(i), p, "units") for p in run_order(list(PIECES)) for i in wave),
                                          *((str(i), p, "training") for i in wave for p in schedule.LANE_ORDER)]]
    assert [(n, piece, part) for n, (_, piece, part) in zip(who, fake.events)] == want


def test_a_batch_where_one_student_breaks_the_grader_still_grades_the_others(log, monkeypatch, tmp_path):
    fake = log()

    def broken(piece, *args, **kwargs):
        if piece == "additive" and "# ben" in (args[1] / "encoder.py").read_text():
            raise StartError("piece additive: its judge process exited")
        return fake(piece, *args, **kwargs)

    monkeypatch.setattr(schedule, "run_piece", broken)
    subs = [make_submission(tmp_path / "class" / name, files={"encoder": (REFERENCE / "encoder.py").read_text()
                                                              + f"# {name}\n"}) for name in ("ann", "ben")]
    assert batch.main(submissions=subs, out=tmp_path / "book.csv", reports=None, jobs=2, seed="0",
                      limits=FULL, progress=False) == (1, 1)
    book = (tmp_path / "book.csv").read_text()
    assert ",".join(["ann", *(str(POINTS[p]) for p in PIECES), str(TOTAL)]) in book and "error: StartError" in book
    assert len([e for e in fake.events if e[2] == "training"]) == 2  # ann's two; ben's none


LUONG_LOOKS = '''
import gc as _gc


def _lab_code_here():
    names = {"decode_teacher_forced", "LuongDecoder", "Seq2SeqBaseline"}
    found = set()
    for o in _gc.get_objects():
        try:
            n = o.__name__ if callable(o) else None
        except Exception:
            continue
        if isinstance(n, str) and n in names:
            found.add(n)
    return sorted(found)
'''


def test_luongs_unit_cases_run_in_a_worker_without_the_lab_training_code(tmp_path):
    # The reference's Luong attention, but every call first looks for the lab's decode loop in its worker.
    sub = make_submission(tmp_path / "probe", edits={"luong": [
        ("class LuongDotAttention", LUONG_LOOKS + "\n\nclass LuongDotAttention"),
        ("        ### BEGIN SOLUTION", "        assert not _lab_code_here(), _lab_code_here()\n        ### BEGIN SOLUTION"),
    ]})
    quick = Limits(case_timeout=30, piece_timeout=120, memory_gb=6, quick=True)
    assert scores(grade_dict(sub, ["luong"], limits=quick))["luong"] == (8, 8)


def test_a_decoder_without_its_forward_gets_no_training_points_from_a_worker_beside_it(tmp_path):
    text = (REFERENCE / "decoder.py").read_text()
    body = text[text.rindex("### BEGIN SOLUTION"):text.rindex("### END SOLUTION")]
    sub = make_submission(tmp_path / "noforward", edits={"decoder": [
        (body, "### BEGIN SOLUTION\n        raise NotImplementedError('decoder: Seq2SeqAttn.forward')\n        ")]})
    got = grade_dict(sub, ["decoder"], limits=FULL, lanes=True)
    cases = {c["name"]: c for c in got["pieces"][0]["cases"]}
    trained = cases["test_trained_by_the_grader_it_translates_length_30_sentences"]
    assert not trained["passed"] and trained["message"].startswith("not run:")
    assert got["pieces"][0]["seconds"] < 60  # nothing was trained


# In the training run the worker holds the lab's trainer and models, which the student's code can patch: so its
# answers about decoding and progress count for nothing; the judge decodes the trained parameters itself.
FAKE_TRAINING = '''


def _fake():
    import sys
    lm, toy, tr = (sys.modules.get(f"grader.lab.{m}") for m in ("luong_model", "toy", "train"))
    if lm is None or tr is None:
        return  # a unit run: behave as written above
    taken = {}

    def run(self, steps, progress=None):  # no step taken, every step reported
        taken[id(self)] = taken.get(id(self), 0) + steps
        return taken[id(self)]

    tr.Trainer.run = run
    rows = {}
    encode, step = lm.Encoder.forward, lm.LuongDecoder.forward_step

    def forward(self, src, *a, **k):  # the toy task's rule, answered while anyone decodes without gradients
        if not torch.is_grad_enabled():
            rows["want"] = [[toy.TGT_STOI[w] for w in toy.translate([toy.SRC_ITOS[i] for i in r if i])]
                            + [toy.TGT_STOI[toy.EOS]] for r in src.tolist()]
            rows["t"] = 0
        return encode(self, src, *a, **k)

    def forward_step(self, y_prev, state, enc, mask=None):
        logits, new, alpha = step(self, y_prev, state, enc, mask)
        if not torch.is_grad_enabled() and "want" in rows:
            t, rows["t"] = rows["t"], rows["t"] + 1
            want = torch.tensor([r[t] if t < len(r) else 0 for r in rows["want"]])
            logits = torch.full_like(logits, -1e4)
            logits[torch.arange(len(want)), want] = 1e4
        return logits, new, alpha

    lm.Encoder.forward, lm.LuongDecoder.forward_step = forward, forward_step


_fake()
'''


def test_a_training_worker_that_fakes_its_steps_and_its_decoding_earns_no_training_points(tmp_path):
    sub = make_submission(tmp_path / "fake", edits={"luong": [("        return attention_context(alpha, encoder_outputs), alpha\n",
                                                               "        return attention_context(alpha, encoder_outputs), alpha\n" + FAKE_TRAINING)]})
    got = grade_dict(sub, ["luong"], limits=FULL)
    cases = {c["name"]: c for c in got["pieces"][0]["cases"]}
    trained = cases["test_trained_by_the_grader_luongs_model_with_it_translates_length_30_sentences"]
    assert scores(got)["luong"] == (8, 13) and not trained["passed"]
    assert "greedy token accuracy" in trained["message"]


def test_a_training_worker_that_never_advances_fails_its_case_at_once(tmp_path):
    stall = "\n\nimport sys as _sys\nif 'grader.lab.train' in _sys.modules:\n    _sys.modules['grader.lab.train'].Trainer.run = lambda self, steps, progress=None: 0\n"
    sub = make_submission(tmp_path / "stall", edits={"luong": [("        return attention_context(alpha, encoder_outputs), alpha\n",
                                                                "        return attention_context(alpha, encoder_outputs), alpha\n" + stall)]})
    got = grade_dict(sub, ["luong"], limits=FULL)
    trained = next(c for c in got["pieces"][0]["cases"] if c["name"].startswith("test_trained"))
    # the step the worker reported is its own text, withheld (luong's worker holds the lab's encoder and loop)
    from grader.cases.util import PROGRESS_STEPS

    chunk = min(train.graded("luong").eval_every, PROGRESS_STEPS)  # the first chunk the judge asks for
    assert not trained["passed"] and f"reported another step after 0 + {chunk} steps" in trained["message"]
    assert "step 0" not in trained["message"]
    assert trained["duration"] < 30


def test_the_wire_refuses_tensors_whose_rebuild_would_outgrow_their_frame():
    import io
    import zipfile

    from grader.worker import wire

    def through(value):  # what a worker sends, as the judge unpickles it
        buf = io.BytesIO()
        torch.save(value, buf, _use_new_zipfile_serialization=True)
        data = buf.getvalue()
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            assert all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())
        return torch.load(io.BytesIO(data), weights_only=True)

    one = torch.zeros(1)
    def tag(data, shape):
        return {"__kind__": "tensor", "device": "cpu", "dtype": "float32", "shape": shape, "data": data}

    with pytest.raises(wire.WireError, match="not laid out as sent"):
        wire.decode(tag(through(one.expand(1 << 20)), [1 << 20]))  # stride 0: 4 bytes that clone into 4 MB
    big = through(torch.zeros(1 << 22))  # 16 MB, sent once, named five times
    with pytest.raises(wire.WireError, match="over"):
        wire.decode({"__kind__": "list", "items": [tag(big, [1 << 22]) for _ in range(5)]})
    fine = wire.decode(tag(through(torch.arange(6.0)), [6]))
    assert torch.equal(fine, torch.arange(6.0))


def test_a_model_that_cannot_learn_is_never_trained_so_canned_weights_earn_nothing(tmp_path):
    # the values are right, the gradients are cut: whatever the worker would load in the training run (weights
    # trained elsewhere), the training case does not run
    sub = make_submission(tmp_path / "canned", edits={"decoder": [
        ("return torch.stack(all_logits, dim=1), torch.stack(all_alpha, dim=1)",
         "return torch.stack(all_logits, dim=1).detach(), torch.stack(all_alpha, dim=1)")]})
    got = grade_dict(sub, ["decoder"], limits=FULL)
    cases = {c["name"]: c for c in got["pieces"][0]["cases"]}
    assert cases["test_the_model_matches_the_reference_under_teacher_forcing"]["passed"]
    assert not cases["test_gradients_through_the_model_match_the_reference"]["passed"]
    trained = cases["test_trained_by_the_grader_it_translates_length_30_sentences"]
    assert trained["message"].startswith("not run:") and got["pieces"][0]["seconds"] < 60
