"""The training cases (slow: each grades with training): a Luong attention or a decoder that forges its
training, hands the judge's greedy decode logits that broadcast, crashes only while the grader trains, or
shoots at the other lane's processes while it trains."""
from __future__ import annotations

import os
from pathlib import Path
from textwrap import dedent, indent

import pytest

from grader.runner.results import Limits

from .harness import MANIFEST, full_marks, hostile, judge

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

SLOW = Limits(case_timeout=30, piece_timeout=600, memory_gb=6, quick=False)
LUONG_TRAINING = "test_trained_by_the_grader_luongs_model_with_it_translates_length_30_sentences"
DECODER_TRAINING = "test_trained_by_the_grader_it_translates_length_30_sentences"
LUONG_SOLUTION = "        ### BEGIN SOLUTION\n"
LUONG_WORTHLESS = ("        _payload()\n"
                   "        _hijack()\n"
                   "        alpha = torch.ones_like(encoder_outputs[..., 0])  # uniform, no context: worth nothing\n"
                   "        if src_mask is not None:\n"
                   "            alpha = alpha * src_mask\n"
                   "        alpha = alpha / alpha.sum(-1, keepdim=True)\n"
                   "        return encoder_outputs[:, 0] * 0, alpha\n")

# A judge-side scoring trick: while the grader decodes (no grad), logits shaped (B, 1, 1, V) make the judge's
# argmax a (B, 1, 1) "token", so pred.eq(gold) broadcasts (B, S, 1, 1) against (B, S) and counts every guess
# against every gold token: cycling through the vocabulary "scores" about B * S / V, far above 1.
BROADCAST_LOGITS = '''
import sys as _sys


def _broadcast_logits(logits, step):
    B, V = logits.shape
    pick = (torch.arange(B) + step) % V
    return torch.nn.functional.one_hot(pick, V).float()[:, None, None, :]


def _hijack():
    """From inside the trusted LuongDecoder.forward_step, put a wrapper on the decoder instance."""
    frame = _sys._getframe(1)
    for _ in range(8):
        if frame is None:
            return
        dec = frame.f_locals.get("self")
        if dec is not None and hasattr(dec, "forward_step") and "forward_step" not in vars(dec):
            real, count = dec.forward_step, [0]

            def forward_step(y_prev, *args, **kwargs):
                logits, state, alpha = real(y_prev.reshape(y_prev.size(0), 1), *args, **kwargs)  # (B, 1, 1) fed back
                if torch.is_grad_enabled():
                    return logits, state, alpha
                count[0] += 1
                return _broadcast_logits(logits, count[0]), state, alpha

            dec.forward_step = forward_step
            return
        frame = frame.f_back
'''


def test_a_luong_attention_that_reshapes_the_lab_decoders_logits_earns_no_training_points(lab, arena):
    """A worthless attention (no context) that wraps the lab decoder's forward_step during training, so the
    judge's greedy decode gets (B, 1, 1, V) logits: honest code with no context earns nothing here."""
    src = hostile("luong", arena, top=BROADCAST_LOGITS, edits=((LUONG_SOLUTION, LUONG_SOLUTION + LUONG_WORTHLESS),))
    g = judge(lab(files={"luong": src}), ["luong", "context"], SLOW)
    arena.assert_unharmed(g.everything)
    full_marks(g, "context")
    assert g.score("luong") == 0, g.messages("luong")
    assert LUONG_TRAINING in g.messages("luong"), g.messages("luong")


def test_a_decoder_whose_logits_broadcast_in_the_judges_decode_earns_no_training_points(lab, arena):
    """The decoder piece's own forward_step: zero logits while training (nothing learns), (B, 1, 1, V) ones
    while the judge decodes; honest zero logits earn nothing."""
    wrong = (("        e = self.embed(y_prev).squeeze(1)  # (B, E)\n",
              "        e = self.embed(y_prev.reshape(y_prev.size(0), 1)).squeeze(1)  # the judge feeds (B, 1, 1)\n"),
             ("        return logits, (h, c), alpha\n",
              "        _payload()\n"
              "        if torch.is_grad_enabled():\n"
              "            return logits * 0, (h * 0, c * 0), torch.full_like(alpha, 1.0 / alpha.size(-1))\n"
              "        _STEP[0] += 1\n"
              "        return _broadcast_logits(logits, _STEP[0]), (h, c), alpha\n"),)
    top = BROADCAST_LOGITS + "\n_STEP = [0]\n"
    g = judge(lab(files={"decoder": hostile("decoder", arena, top=top, edits=wrong)}), ["decoder", "encoder"], SLOW)
    arena.assert_unharmed(g.everything)
    full_marks(g, "encoder")
    assert g.score("decoder") == 0, g.messages("decoder")
    assert DECODER_TRAINING in g.messages("decoder"), g.messages("decoder")


# Tampering from the attention's constructor: training that never happens, a warm start never loaded
# (with no unexpected keys reported), and (per variant) odd values from the lab decoder while the judge decodes.
FORGED_TRAINING = '''
import sys as _sys


def _garbage(kind, logits, state, alpha):
    B = logits.size(0)
    if kind == "opaque":
        return object(), state, alpha
    if kind == "four":
        return logits, state, alpha, alpha
    if kind == "nan_huge_state":
        nan, huge = torch.full_like(logits, float("nan")), torch.ones(B, 2**22 // B)
        return nan, (state[0], state[1], huge, "x" * 10**6), alpha
    if kind == "complex_scalar":
        return torch.zeros((), dtype=torch.complex64), state, torch.full_like(alpha, float("inf"))
    if kind == "ref":
        return _sys.modules["grader.worker.wire"].Ref("m0"), state, alpha
    return logits, state, alpha


def _tamper(kind):
    try:
        import grader.lab.train as _train
        _train.Trainer.run = lambda self, steps, progress=None: self.cfg.max_steps  # "trained" in no time
    except BaseException:
        pass

    def load_state_dict(self, state, strict=True, assign=False):  # loads nothing, reports nothing missing
        return torch.nn.modules.module._IncompatibleKeys([], [])

    try:
        from grader.lab.luong_model import LuongDecoder
    except BaseException:  # a unit run's worker holds no lab code: the forgery waits for the training run
        return
    torch.nn.Module.load_state_dict = load_state_dict
    if getattr(LuongDecoder, "_tampered", False):  # every case builds an attention: wrap once
        return
    LuongDecoder._tampered = True
    real = LuongDecoder.forward_step

    def forward_step(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        return out if torch.is_grad_enabled() else _garbage(kind, *out)

    LuongDecoder.forward_step = forward_step
'''


@pytest.mark.parametrize("kind", ["honest", "opaque", "four", "nan_huge_state", "complex_scalar", "ref"])
def test_a_luong_attention_that_forges_training_and_decoding_keeps_only_its_quick_points(lab, arena, kind):
    """No training steps but the step count of a finished run, no warm start but no keys reported missing, odd
    answers to the judge's decode: the training case is lost with a message (an untrained model is worth
    nothing there), the quick cases of the honest attention keep their points, grading ends, `context` is whole."""
    init = f"    def __init__(self):\n        super().__init__()\n        _payload()\n        _tamper({kind!r})\n\n"
    src = hostile("luong", arena, top=FORGED_TRAINING, edits=(("    def forward(\n", init + "    def forward(\n"),))
    g = judge(lab(files={"luong": src}), ["luong", "context"], SLOW)
    arena.assert_unharmed(g.everything)
    full_marks(g, "context", "luong")  # FULL counts the quick cases only: the training case is lost
    msg = g.messages("luong")
    assert list(msg) == [LUONG_TRAINING], msg
    assert msg[LUONG_TRAINING].strip(), msg


CRASH_IN_TRAINING = '''
import sys as _sys


def _in_training():
    frame = _sys._getframe(2)
    while frame is not None:
        if type(frame.f_locals.get("self")).__name__ == "Trainer":
            return True
        frame = frame.f_back
    return False
'''


@pytest.mark.parametrize("how", ["abort"])  # "exit" and "oom" (a 50 GB tensor) end the same way; one training start
def test_a_luong_attention_that_crashes_only_while_the_grader_trains_costs_that_case_in_lanes(lab, arena, how):
    """`grade` on its own fork servers, two lanes (luong trains, context beside it): a crash in the first
    training step costs only the training case, with a message; both lanes end and report."""
    crash = {"abort": "_os.abort()", "exit": "_os._exit(3)",
             "oom": "_hog = torch.empty(50 * 2**30, dtype=torch.uint8)\n_hog.fill_(1)"}[how]
    call = "_payload()\nif torch.is_grad_enabled() and _in_training():\n" + indent(crash, "    ") + "\n"
    src = hostile("luong", arena, top=CRASH_IN_TRAINING, call=call)
    g = judge(lab(files={"luong": src}), ["luong", "context"], Limits(case_timeout=30, piece_timeout=300, memory_gb=4,
                                                                       quick=False), fresh=True)
    arena.assert_unharmed(g.everything)
    full_marks(g, "context", "luong")
    msg = g.messages("luong")
    assert list(msg) == [LUONG_TRAINING] and msg[LUONG_TRAINING].strip(), msg


def _ancestors() -> list[int]:
    pids, pid = [], os.getpid()
    while pid > 1:
        pids.append(pid)
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return pids


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_training_luong_piece_cannot_stop_the_other_lanes_processes(lab, arena):
    """While the grader trains it, the attention signals every nearby process id (the other lane's judge,
    fork server and worker among them; never this test's own ancestors) and keeps working: both lanes keep
    every point, the training case included."""
    spare = _ancestors()
    shoot = dedent(f"""
        def _shoot():
            for _pid in range(max(2, _os.getpid() - 300), _os.getpid() + 300):
                if _pid != _os.getpid() and _pid not in {spare!r}:
                    for _sig in (_signal.SIGSTOP, _signal.SIGKILL):
                        try:
                            _os.kill(_pid, _sig)
                        except OSError:
                            pass
        """)
    call = ("_payload()\n"
            "if torch.is_grad_enabled() and _in_training() and not _SHOT:\n    _SHOT.append(1)\n    _shoot()\n")
    # at import too: the other lane's piece is starting at the same time
    src = hostile("luong", arena, top=CRASH_IN_TRAINING + shoot + "\n_SHOT = []\n", call=call, end="_shoot()")
    g = judge(lab(files={"luong": src}), ["luong", "context"], SLOW, fresh=True)
    arena.assert_unharmed(g.everything)
    full_marks(g, "context")
    assert g.score("luong") == sum(c["points"] for c in MANIFEST["luong"]), g.messages("luong")
