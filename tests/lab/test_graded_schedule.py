"""The graded training cases' warm start and schedule (train.graded, train.WARM_STEP), in-process: the reference
learns from the checkpoint to the 0.90 the case asks at length 30, and what cannot learn stays below it."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from grader import REFERENCE
from grader.judge.reference_code import load_reference
from grader.lab import artifacts, evaluate, toy, train
from grader.lab.luong_model import Seq2SeqLuong

NEEDED = 0.90  # what the training cases ask at source length 30


@pytest.fixture(scope="module")
def ref():
    return load_reference(REFERENCE)


def length30() -> list:
    return [p for p in toy.read_split("test") if len(p[0]) == 30]


def build(ref, kind: str, attention: nn.Module | None = None) -> nn.Module:
    cfg = train.graded(kind)
    torch.manual_seed(cfg.seed)
    dims = (len(toy.SRC_ITOS), len(toy.TGT_ITOS), cfg.embed_dim, cfg.hidden_dim)
    if kind == "luong":
        return Seq2SeqLuong(*dims, attention or ref.luong.LuongDotAttention())
    return ref.decoder.Seq2SeqAttn(*dims)


def accuracy30(model: nn.Module) -> float:
    torch.set_num_threads(1)
    return evaluate.accuracy_by_length(model, length30())[30]


class Uniform(nn.Module):
    """Attention whose scores are not used: the mean of the real encoder states."""

    def forward(self, encoder_outputs, decoder_state, src_mask=None):
        mask = torch.ones(encoder_outputs.shape[:2], dtype=torch.bool) if src_mask is None else src_mask
        alpha = mask.float() / mask.sum(-1, keepdim=True)  # (B, T_src)
        return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1), alpha


@pytest.mark.parametrize("kind", ["bahdanau", "luong"])
def test_the_warm_start_alone_is_well_short_of_what_the_case_asks(ref, kind):
    # a decoder that cannot learn keeps the checkpoint: it must fail the case with room to spare
    model = build(ref, kind)
    model.load_state_dict(artifacts.load_warm_start(kind))
    assert accuracy30(model) < NEEDED - 0.08


def test_the_warm_start_holds_every_parameter_of_the_labs_layout(ref):
    for kind in ("bahdanau", "luong"):
        assert set(artifacts.load_warm_start(kind)) == set(build(ref, kind).state_dict())


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bahdanau", "luong"])
def test_the_reference_trained_on_the_graded_schedule_clears_the_bar_with_a_margin(ref, kind):
    model = build(ref, kind)
    model.load_state_dict(artifacts.load_warm_start(kind))
    result = train.train(model, train.graded(kind))
    assert result.steps == train.GRADED_STEPS[kind]  # no early stop: every step taken
    assert accuracy30(model) >= NEEDED + 0.015


@pytest.mark.slow
def test_luongs_model_with_an_attention_that_ignores_its_scores_stays_below_the_bar(ref):
    model = build(ref, "luong", Uniform())
    model.load_state_dict(artifacts.load_warm_start("luong"))
    train.train(model, train.graded("luong"))
    assert accuracy30(model) < NEEDED


@pytest.mark.slow
def test_a_bahdanau_model_whose_attention_ignores_its_scores_stays_below_the_bar(ref):
    model = build(ref, "bahdanau")
    model.load_state_dict(artifacts.load_warm_start("bahdanau"))
    model.decoder.attn = Uniform()  # after the load: the trained W_h, W_s and v go unused
    train.train(model, train.graded("bahdanau"))
    assert accuracy30(model) < NEEDED


@pytest.mark.slow
def test_a_model_whose_gradient_is_cut_before_the_decoder_learns_nothing_and_fails(ref):
    # every parameter frozen but the output layer's: the attention and the recurrence cannot learn
    model = build(ref, "bahdanau")
    model.load_state_dict(artifacts.load_warm_start("bahdanau"))
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith("decoder.head."))
    train.train(model, train.graded("bahdanau"))
    assert accuracy30(model) < NEEDED
