"""Hidden cases for the `luong` piece: LuongDotAttention.forward."""
from __future__ import annotations

import pytest
import torch

from grader.lab import artifacts
from grader.judge import verdicts
from grader.lab import luong_model
from grader.lab import toy
from grader.lab import train
from . import util
from .test_additive import POLARITY, check_alpha, pair_result, right_values

pytestmark = pytest.mark.piece("luong")
MATCHES = "it matches the reference and scales by sqrt d"  # the case whose checks name the usual causes


def attend(sub, enc, q, mask):
    m = util.build(sub, "LuongDotAttention")
    out = pair_result(verdicts.call(m, enc, q, mask, what="LuongDotAttention.forward"))
    B, T, H = enc.shape
    return verdicts.tensor(out[0], "context", (B, H)), verdicts.tensor(out[1], "alpha", (B, T))


@pytest.mark.points(2)
def test_it_matches_the_reference_and_scales_by_sqrt_d(sub, ref):
    s = util.MAIN
    enc, q = torch.randn(s.B, s.T, s.H) * 2, torch.randn(s.B, s.H) * 2
    mask = torch.ones(s.B, s.T, dtype=torch.bool)
    context, alpha = attend(sub, enc, q, mask)
    r = ref.luong.LuongDotAttention()
    check_alpha(alpha, mask)
    d = s.H**0.5
    # the scores are linear in the query, so scaling it gives the usual mistakes' weights
    if verdicts.is_close(alpha, r(enc, q * d, mask)[1]):
        verdicts.fail("alpha looks unscaled: divide the dot products by sqrt(d), the square root of the state size.")
    if verdicts.is_close(alpha, r(enc, q / d, mask)[1]):
        verdicts.fail("alpha looks divided by d: divide the dot products by sqrt(d), not by d.")
    if verdicts.is_close(alpha, r(enc, q * d / s.T**0.5, mask)[1]):
        verdicts.fail("alpha looks divided by the square root of the sentence length: d is the size of a state "
                    "(the last dimension), not the number of source positions.")
    rc, ra = r(enc, q, mask)
    util.close(alpha, ra, "alpha", "Score each encoder state by its dot product with the decoder state, / sqrt(d), softmax over positions.")
    util.close(context, rc, "context", "The context is the alpha-weighted sum of the encoder states.")


@pytest.mark.points(1)
def test_gradients_flow_to_the_encoder_states_and_the_query_as_in_the_reference(sub, ref):
    s = util.MAIN
    mask = torch.ones(s.B, s.T, dtype=torch.bool)  # no pads: the masking has its own case
    enc, q = torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H)
    context, alpha = attend(sub, enc, q, mask)
    right_values(context, alpha, *ref.luong.LuongDotAttention()(enc, q, mask), MATCHES)  # paid only when right
    m = util.build(sub, "LuongDotAttention")
    grads = verdicts.call(m.input_grads, enc, q, mask, wrt=[0, 1], what="backward through LuongDotAttention.forward")
    e, k = enc.clone().requires_grad_(True), q.clone().requires_grad_(True)
    ref.luong.LuongDotAttention()(e, k, mask)[0].square().sum().backward()  # the same loss through the reference
    hint = ("Keep the scores, the weights and the context in the graph (no .detach(), .item(), torch.no_grad() or "
            "new tensors built from their values): the grader trains through them.")
    for name, got, want in (("the encoder states", grads[0] if isinstance(grads, list) else None, e.grad),
                            ("the query", grads[1] if isinstance(grads, list) and len(grads) > 1 else None, k.grad)):
        if not isinstance(got, torch.Tensor):
            verdicts.fail(f"no gradient reaches {name}. {hint}")
        util.close(got, want, f"the gradient with respect to {name}", hint)


@pytest.mark.points(2)
def test_pads_get_exactly_zero_weight(sub, ref):
    s = util.MAIN
    n = util.lengths(s)
    mask = util.mask_for(n, s.T)
    enc, q = torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H)
    context, alpha = attend(sub, enc, q, mask)
    check_alpha(alpha, mask)
    right_values(context, alpha, *ref.luong.LuongDotAttention()(enc, q, mask), MATCHES)
    noisy = torch.where(mask[..., None], enc, 100 * torch.randn(s.B, s.T, s.H))
    verdicts.close(attend(sub, noisy, q, mask)[0], context, "the context with noise written into the pad states",
                 "Pad positions must get exactly zero weight. " + POLARITY)


@pytest.mark.points(1)
@pytest.mark.parametrize("s", util.EDGES)
def test_it_handles_edge_sizes(sub, ref, s):
    enc, q = torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H)
    util.attention_at_the_edge(lambda: attend(sub, enc, q, None), ref.luong.LuongDotAttention()(enc, q),
                               lambda: right_at_the_usual_sizes(sub, ref), "LuongDotAttention", MATCHES)


def right_at_the_usual_sizes(sub, ref) -> None:
    """The module on MAIN sizes without a mask: an edge-size case blames the edge only when this passes."""
    s = util.MAIN
    enc, q = torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H)
    context, alpha = attend(sub, enc, q, None)
    rc, ra = ref.luong.LuongDotAttention()(enc, q)
    util.close(alpha, ra, "alpha", "")
    util.close(context, rc, "context", "")


@pytest.mark.points(1)
def test_tensors_follow_the_input_device(sub, ref):
    s = util.MAIN
    mask = util.mask_for(util.lengths(s), s.T)
    enc, q = torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H)
    context, alpha = attend(sub, enc, q, mask)
    rc, ra = ref.luong.LuongDotAttention()(enc, q, mask)
    # which case names the cause: a mistake in the pads (that case) or in the scores (the first case)
    full = torch.ones_like(mask)
    case = MATCHES if not verdicts.is_close(attend(sub, enc, q, full)[1], ref.luong.LuongDotAttention()(enc, q, full)[1]) \
        else "pads get exactly zero weight"
    util.right_on_the_cpu({"alpha": (alpha, ra), "the context": (context, rc)}, case)  # everything compared below
    util.same_on_a_device(util.build(sub, "LuongDotAttention"), enc, q, mask, what="LuongDotAttention.forward",
                          result=pair_result, outs=[util.Out("alpha", (1,), ra), util.Out("the context", (0,), rc)])


@pytest.mark.points(0)
def test_cuda_matches_cpu(sub, ref):
    def alpha_on(dev):
        s = util.MAIN
        enc, q = torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H)
        return attend(sub, enc.to(dev), q.to(dev), None)[1], ref.luong.LuongDotAttention()(enc, q)[1]
    util.cuda_matches_cpu(alpha_on, "alpha")


@pytest.mark.points(5)
@pytest.mark.slow
@pytest.mark.needs("test_it_matches_the_reference_and_scales_by_sqrt_d", "test_pads_get_exactly_zero_weight",
                   "test_gradients_flow_to_the_encoder_states_and_the_query_as_in_the_reference")
@pytest.mark.timeout(900)  # a few seconds on 2 idle cores; generous for busy machines
@pytest.mark.title("trained by the grader, Luong's model with it translates length-30 sentences")
def test_trained_by_the_grader_luongs_model_with_it_translates_length_30_sentences(sub, ref, progress):
    cfg = train.graded("luong")
    verdicts.call(sub.seed_worker, cfg.seed, what="seeding")
    attn = util.build(sub, "LuongDotAttention")
    # Luong's decoder (grader/lab/luong_model.py, the lab's code) around your attention, built in your worker
    model = verdicts.call(sub.new, "@lab:luong_model.Seq2SeqLuong", len(toy.SRC_ITOS), len(toy.TGT_ITOS), cfg.embed_dim,
                        cfg.hidden_dim, sub.ref(attn.name), what="the lab's Luong model around your LuongDotAttention")
    judge = luong_model.Seq2SeqLuong(len(toy.SRC_ITOS), len(toy.TGT_ITOS), cfg.embed_dim, cfg.hidden_dim,
                                     ref.luong.LuongDotAttention())
    acc = util.graded_training(model, cfg, artifacts.load_warm_start("luong"), "the Luong model with your attention",
                               "LuongDotAttention must be a module without parameters of its own", judge, progress)
    if acc < 0.90:
        said = (f"Trained by the grader, Luong's decoder with your LuongDotAttention reaches {acc:.3f} greedy token "
                "accuracy at source length 30; it needs 0.90.")
        # a wrong forward (unscaled, unmasked, ...) is named by a unit case; only a right one points at the gradient
        if not util.right_elsewhere(lambda: right_on_random_inputs(sub, ref)):
            verdicts.fail(f"{said} Your LuongDotAttention differs from the reference on random inputs. " + util.see(MATCHES))
        verdicts.fail(f"{said} Your weights have the reference's values, so look at the gradient. Gradients must flow "
                    "through your scores and weights (no .detach(), .item() or new tensors built from their values).")


def right_on_random_inputs(sub, ref) -> None:
    """The attention on MAIN sizes with pads, against the reference: what the unit cases ask, in one check."""
    s = util.MAIN
    mask = util.mask_for(util.lengths(s), s.T)
    enc, q = torch.randn(s.B, s.T, s.H) * 2, torch.randn(s.B, s.H) * 2
    context, alpha = attend(sub, enc, q, mask)
    rc, ra = ref.luong.LuongDotAttention()(enc, q, mask)
    util.close(alpha, ra, "alpha", "")
    util.close(context, rc, "context", "")
