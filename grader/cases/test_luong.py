"""Hidden cases for the `luong` piece: LuongDotAttention.forward."""
from __future__ import annotations

import pytest
import torch

from grader import artifacts, checks, toy, train
from . import util
from .test_additive import POLARITY, check_alpha, right_values

pytestmark = pytest.mark.piece("luong")


def attend(sub, enc, q, mask):
    m = util.build(sub, "LuongDotAttention")
    out = checks.pair(checks.call(m, enc, q, mask, what="LuongDotAttention.forward"), "forward's result (context, alpha)")
    B, T, H = enc.shape
    return checks.tensor(out[0], "context", (B, H)), checks.tensor(out[1], "alpha", (B, T))


@pytest.mark.points(3)
def test_it_matches_the_reference_and_scales_by_sqrt_d(sub, ref):
    s = util.MAIN
    enc, q = torch.randn(s.B, s.T, s.H) * 2, torch.randn(s.B, s.H) * 2
    mask = torch.ones(s.B, s.T, dtype=torch.bool)
    context, alpha = attend(sub, enc, q, mask)
    r = ref.luong.LuongDotAttention()
    d = s.H**0.5
    # the scores are linear in the query, so scaling it gives the usual mistakes' weights
    if checks.is_close(alpha, r(enc, q * d, mask)[1]):
        checks.fail("alpha looks unscaled: divide the dot products by sqrt(d), the square root of the state size.")
    if checks.is_close(alpha, r(enc, q / d, mask)[1]):
        checks.fail("alpha looks divided by d: divide the dot products by sqrt(d), not by d.")
    rc, ra = r(enc, q, mask)
    checks.close(alpha, ra, "alpha", "Score each encoder state by its dot product with the decoder state, / sqrt(d), softmax over positions.")
    checks.close(context, rc, "context", "The context is the alpha-weighted sum of the encoder states.")


@pytest.mark.points(2)
def test_pads_get_exactly_zero_weight(sub, ref):
    s = util.MAIN
    n = util.lengths(s)
    mask = util.mask_for(n, s.T)
    enc, q = torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H)
    context, alpha = attend(sub, enc, q, mask)
    check_alpha(alpha, mask)
    right_values(context, alpha, *ref.luong.LuongDotAttention()(enc, q, mask))
    noisy = torch.where(mask[..., None], enc, 100 * torch.randn(s.B, s.T, s.H))
    checks.close(attend(sub, noisy, q, mask)[0], context, "the context with noise written into the pad states",
                 "Pad positions must get exactly zero weight. " + POLARITY)


@pytest.mark.points(1)
@pytest.mark.parametrize("s", util.EDGES)
def test_it_handles_edge_sizes(sub, ref, s):
    enc, q = torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H)
    context, alpha = attend(sub, enc, q, None)
    rc, ra = ref.luong.LuongDotAttention()(enc, q)
    checks.close(alpha, ra, "alpha", "Squeeze only the dimension you added, not every size-1 dimension.")
    checks.close(context, rc, "context", "Squeeze only the dimension you added, not every size-1 dimension.")


@pytest.mark.points(1)
def test_tensors_follow_the_input_device(sub, ref):
    s = util.MAIN
    mask = util.mask_for(util.lengths(s), s.T)
    enc, q = torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H)
    checks.close(attend(sub, enc, q, mask)[1], ref.luong.LuongDotAttention()(enc, q, mask)[1], "alpha on the CPU",
                 "Device-agnostic code must first be right on the CPU; see the other luong cases.")
    context, alpha = attend(sub, enc.to("meta"), q.to("meta"), mask.to("meta"))
    checks.on_device("meta", "make new tensors on the inputs' device", context=context, alpha=alpha)


@pytest.mark.points(0)
def test_cuda_matches_cpu(sub, ref):
    dev = util.cuda_or_skip()
    s = util.MAIN
    enc, q = torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H)
    _, alpha = attend(sub, enc.to(dev), q.to(dev), None)
    checks.close(alpha.cpu(), ref.luong.LuongDotAttention()(enc, q)[1], "alpha on CUDA", "CUDA and CPU disagree.", atol=1e-4, rtol=1e-3)


@pytest.mark.points(5)
@pytest.mark.slow
@pytest.mark.timeout(900)  # about 25 s on 2 idle cores; generous for busy machines
def test_trained_by_the_grader_luongs_model_with_it_translates_length_30_sentences(sub, ref, progress):
    cfg = train.graded()
    checks.call(sub.seed_worker, cfg.seed, what="seeding")
    attn = util.build(sub, "LuongDotAttention")
    # Luong's decoder (grader/luong_model.py, the lab's code) around your attention, built in your worker
    model = checks.call(sub.new, "@lab:Seq2SeqLuong", len(toy.SRC_ITOS), len(toy.TGT_ITOS), cfg.embed_dim,
                        cfg.hidden_dim, sub.ref(attn.name), what="the lab's Luong model around your LuongDotAttention")
    acc = util.graded_training(model, cfg, artifacts.load_warm_start("luong"), "the Luong model with your attention",
                               "LuongDotAttention must be a module without parameters of its own", progress)
    if acc < 0.90:
        checks.fail(f"trained by the grader, Luong's decoder with your LuongDotAttention reaches {acc:.3f} greedy token "
                    "accuracy at source length 30; it needs 0.90. Gradients must flow through your scores and weights "
                    "(no .detach(), no .item(), no new tensors built from their values), and the softmax runs over "
                    "source positions.")
