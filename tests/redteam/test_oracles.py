"""Oracles and hints: points paid for a device check code can special-case (a device it names) or for wrong values of
the right shape, a greedy decode that has the judge decode, and hints that say too much about the answer.

Each hostile file is the reference (or a known bug) with code added: it must earn no more than honest code
with the same visible behaviour, leave the judge and its neighbours whole, and leak no hidden line.
"""
from __future__ import annotations

import re

import pytest
import torch

from grader.judge import verdicts

from helpers import POINTS, REFERENCE

from .harness import CONTEXT_SOLUTION, FULL, MANIFEST, ZEROS, full_marks, hostile, judge, only_wrong_values

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

DEVICE_CASE = "test_tensors_follow_the_input_device"
ADDITIVE_MASK = 'scores = scores.masked_fill(~src_mask, float("-inf"))'
# the device bug bench/gpu.py uses: a tensor made on the CPU inside forward, right on the CPU, wrong elsewhere
DEVICE_BUG = (ADDITIVE_MASK, 'scores = (scores + torch.zeros(scores.shape)).masked_fill(~src_mask, float("-inf"))')
META_SPECIAL_CASE = '''
        if encoder_outputs.device.type == "meta":  # what the old meta device case ran on, and nothing device-agnostic
            return (torch.empty(encoder_outputs.size(0), encoder_outputs.size(2), device="meta"),
                    torch.empty(encoder_outputs.shape[:2], device="meta"))
'''
OFF_CPU_SPECIAL_CASE = '''
        if encoder_outputs.device.type != "cpu":  # any device but the CPU: answers of the right shape and device
            return (encoder_outputs.new_zeros(encoder_outputs.size(0), encoder_outputs.size(2)),
                    encoder_outputs.new_zeros(encoder_outputs.shape[:2]))
'''
STAND_IN = ("encoder", "additive", "context", "luong", "decoder")  # the device cases on the stand-in CUDA device


# the lesson's six pieces and their points (73 together); a piece added later has its own
SIX = {"encoder": 12, "additive": 13, "context": 9, "luong": 13, "decoder": 18, "evaluation": 8}


def test_every_stand_in_device_case_is_worth_a_point_and_the_six_pieces_total_stays_73():
    device = {p: c["points"] for p, cases in MANIFEST.items() for c in cases if c["case"] == DEVICE_CASE}
    assert {p for p in device if p in SIX} == {"encoder", "additive", "context", "luong", "decoder"}
    assert {p: device[p] for p in STAND_IN} == dict.fromkeys(STAND_IN, 1)
    assert {p: POINTS[p] for p in SIX} == SIX
    assert sum(POINTS[p] for p in SIX) == 73  # the manifest's, not the literal's: the lesson's total


@pytest.mark.parametrize("special", [META_SPECIAL_CASE, OFF_CPU_SPECIAL_CASE], ids=["meta", "not the CPU"])
def test_special_casing_a_device_earns_nothing_over_honest_code_with_the_same_cpu_behaviour(lab, arena, special):
    honest = hostile("additive", arena, edits=(DEVICE_BUG,))
    cheat = hostile("additive", arena, call="_payload()\n", edits=(DEVICE_BUG, (
        "        ### BEGIN SOLUTION\n", "        ### BEGIN SOLUTION\n" + special.lstrip("\n"))))
    g_honest = judge(lab(files={"additive": honest}), ["additive"])
    g_cheat = judge(lab(files={"additive": cheat}), ["additive", "context"])
    # the stand-in device is not meta, and its answers' values are compared: the device point is lost either way
    assert g_cheat.score("additive") == g_honest.score("additive") == FULL["additive"] - 1
    assert DEVICE_CASE in g_honest.messages("additive")  # the hint reaches the honest student
    assert DEVICE_CASE in g_cheat.messages("additive")
    full_marks(g_cheat, "context")
    arena.assert_unharmed(g_cheat.everything, g_honest.everything)


def test_an_answer_on_meta_in_a_value_case_scores_nothing_and_is_told_why(lab, arena):
    always_meta = ("    return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)  # (B, 1, T) @ (B, T, H) -> (B, H)\n",
                   "    _payload()\n    return torch.empty(alpha.size(0), encoder_outputs.size(-1), device='meta')\n")
    g = judge(lab(files={"context": hostile("context", arena, edits=(always_meta,))}), ["context"])
    assert g.score("context") == 0
    msgs = g.messages("context")
    assert msgs and all("meta tensor" in m for m in msgs.values()), msgs  # a hint, never "the grader could not run"
    arena.assert_unharmed(g.everything)


def test_a_constant_context_earns_no_no_loop_points(lab, arena):
    src = hostile("context", arena, edits=((CONTEXT_SOLUTION, "    _payload()\n" + ZEROS),))
    g = judge(lab(files={"context": src}), ["context", "luong"])
    assert g.score("context") == 0
    only_wrong_values(g, "context")
    assert "test_it_runs_no_python_loop_over_positions" in g.messages("context")
    full_marks(g, "luong")
    arena.assert_unharmed(g.everything)


def test_a_decoder_with_the_right_shapes_and_wrong_values_scores_nothing(lab, arena):
    wrong = (("        return logits, (h, c), alpha\n",
              "        _payload()\n"
              "        return logits * 0, (h * 0, c * 0), torch.full_like(alpha, 1.0 / alpha.size(-1))\n"),)
    g = judge(lab(files={"decoder": hostile("decoder", arena, edits=wrong)}), ["decoder", "encoder"])
    assert g.score("decoder") == 0, g.messages("decoder")
    full_marks(g, "encoder")
    arena.assert_unharmed(g.everything)


def test_a_constant_additive_attention_earns_no_pad_noise_points(lab, arena):
    zeros = "        _payload()\n        return encoder_outputs.new_zeros(encoder_outputs.shape[::2]), " \
            "encoder_outputs.new_zeros(encoder_outputs.shape[:2])\n"
    ref = (REFERENCE / "additive.py").read_text()
    body = ref[ref.index("        ### BEGIN SOLUTION"):ref.index("        ### END SOLUTION")]
    g = judge(lab(files={"additive": hostile("additive", arena, edits=((body, zeros),))}), ["additive"])
    arena.assert_unharmed(g.everything)
    assert g.score("additive") == 0, g.messages("additive")


def test_a_failed_comparison_says_an_order_of_magnitude_never_the_error():
    expected = torch.tensor([[9.96, -0.325]])
    for actual, said in ((torch.zeros(1, 2), "off by more than 1"), (expected + 0.00712, "off by about 1e-2"),
                         (expected + torch.tensor([[0.0, 3.3e-4]]), "off by about 1e-3"), (expected + 0.5, "off by less than 1")):
        with pytest.raises(verdicts.CaseFailure) as e:
            verdicts.close(actual, expected, "context", "hint")
        assert said in str(e.value)
        assert not re.search(r"\d\.\d", str(e.value)), str(e.value)


def numbers(text: str) -> list[str]:
    """Every number in a message but shape sizes and the powers of ten how_far gives."""
    text = re.sub(r"\((\d+, )*\d*\)|1e-\d+|T_src=\d+|sqrt\(d\)|\bB = 1\b", "", text)
    return re.findall(r"\d+\.\d+|\d+e-?\d+", text)


OFFSET = "    return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1) + {}\n"


@pytest.mark.parametrize("offset", ["9.96", "encoder_outputs.abs().amax(1) * 0.5", "0"])
def test_a_wrong_context_learns_nothing_numeric_about_the_answer(lab, arena, offset):
    body = ZEROS if offset == "0" else OFFSET.format(offset)  # zeros: the error would be the answer itself
    g = judge(lab(files={"context": hostile("context", arena, edits=((CONTEXT_SOLUTION, "    _payload()\n" + body),))}),
              ["context"])
    assert g.score("context") == 0
    only_wrong_values(g, "context")
    for name, m in g.messages("context").items():
        assert not numbers(m), f"{name}: {m}"
    arena.assert_unharmed(g.everything)


GREEDY_BODY = '''    _payload()
    B = src.size(0)
    tgt = torch.cat([sos, sos.new_zeros(B, steps)], dim=1)
{how}
'''
JUDGE_DECODES = {
    "teacher_forcing_ratio=0.0": "    logits, alpha = model(src, src_mask, tgt, teacher_forcing_ratio=0.0)\n"
                                 "    return logits.argmax(-1), alpha",
    "a positional ratio through forward": "    logits, alpha = model.forward(src, src_mask, tgt, 0.0)\n"
                                          "    return logits.argmax(-1), alpha",
    "a ratio of almost nothing": "    logits, alpha = model(src, src_mask, tgt, teacher_forcing_ratio=1e-12)\n"
                                 "    return logits.argmax(-1), alpha",
    "teacher forcing on its own prefix": (
        "    toks = sos\n"
        "    for _ in range(steps):\n"
        "        logits, alpha = model(src, src_mask, torch.cat([toks, sos], dim=1))\n"
        "        toks = torch.cat([toks, logits[:, -1:].argmax(-1)], dim=1)\n"
        "    return toks[:, 1:], model(src, src_mask, torch.cat([toks[:, :-1], sos], dim=1))[1]"),
}


@pytest.mark.parametrize("how", list(JUDGE_DECODES))
def test_a_greedy_decode_that_has_the_judge_decode_earns_nothing(lab, arena, how):
    ref = (REFERENCE / "evaluation.py").read_text()
    start = ref.index("    ### BEGIN SOLUTION\n    enc_outputs, (h, c) = model.encoder(src)")
    solution = ref[start:ref.index("    ### END SOLUTION", start)]
    src = hostile("evaluation", arena, edits=((solution, GREEDY_BODY.format(how=JUDGE_DECODES[how])),))
    g = judge(lab(files={"evaluation": src}), ["evaluation"])
    assert g.score("evaluation") == 0, g.messages("evaluation")  # a greedy_decode that decodes nothing earns 0
    assert any("forward_step" in m for m in g.messages("evaluation").values()), g.messages("evaluation")
    arena.assert_unharmed(g.everything)
