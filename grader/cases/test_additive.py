"""Hidden cases for the `additive` piece: BahdanauAttention.forward."""
from __future__ import annotations

import pytest
import torch

from grader.judge import verdicts
from . import util

pytestmark = pytest.mark.piece("additive")

MATCHES = "it matches the reference on random weights"  # the case whose checks name the usual causes
POLARITY = ("src_mask is True at real tokens and False at pads, and masked_fill fills where the mask it is given is "
            "True: check that what you fill is the pads, not the real tokens.")


def pair_of(sub, ref, H: int):
    r = ref.additive.BahdanauAttention(H)
    return util.holding(sub, r, "BahdanauAttention", H), r


def padded_case(sub, ref):
    """The module pair on MAIN sizes and inputs with pads (enc, s_prev, mask), in the order the cases draw them."""
    s = util.MAIN
    m, r = pair_of(sub, ref, s.H)
    mask = util.mask_for(util.lengths(s), s.T)
    return m, r, (torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H), mask)


def pair_result(out):
    """An attention's result, checked to be a pair (context, alpha)."""
    return verdicts.pair(out, "forward's result (context, alpha)")


def attend(m, enc, s_prev, mask, B: int, T: int, H: int):
    out = pair_result(verdicts.call(m, enc, s_prev, mask, what="BahdanauAttention.forward"))
    context = verdicts.tensor(out[0], "context", (B, H))
    alpha = verdicts.tensor(out[1], "alpha", (B, T))
    return context, alpha


NO_SOFTMAX = ("alpha is not a softmax: its weights must lie between 0 and 1 and each row sum to 1, and some are "
              "negative, -inf or above 1. Apply torch.softmax(scores, dim=-1) after setting the pads' scores to -inf.")


def check_alpha(alpha, mask):
    if alpha.isnan().any():
        verdicts.fail("alpha contains NaN: a softmax over a row whose every score is -inf gives NaN. " + POLARITY)
    if (alpha < 0).any() or (alpha > 1 + 1e-6).any():  # scores, not weights: the softmax is missing
        verdicts.fail(NO_SOFTMAX)
    pads = alpha.masked_select(~mask)
    if pads.numel() and pads.abs().max() > 0:
        if alpha.masked_select(mask).abs().max() == 0:
            verdicts.fail("alpha puts all its weight on pads and none on real tokens. " + POLARITY)
        verdicts.fail("alpha is not exactly 0 at pad positions: set their scores to -inf before the softmax.")
    if not verdicts.is_close(alpha.sum(-1), torch.ones(alpha.size(0))):
        verdicts.fail("the rows of alpha do not sum to 1: take the softmax over the source positions (the last dimension).")


def right_values(context, alpha, ref_context, ref_alpha, case: str = MATCHES) -> None:
    """A property case pays only when the values are right too; `case` is the one that names the cause."""
    util.close(alpha, ref_alpha, "alpha", util.see(case))
    util.close(context, ref_context, "context", util.see(case))


def right_at_the_usual_sizes(sub, ref) -> None:
    """The module on MAIN sizes with every position real: an edge-size case blames the edge only when this passes."""
    s = util.MAIN
    m, r = pair_of(sub, ref, s.H)
    enc, s_prev, mask = torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H), torch.ones(s.B, s.T, dtype=torch.bool)
    context, alpha = attend(m, enc, s_prev, mask, s.B, s.T, s.H)
    rc, ra = r(enc, s_prev, mask)
    util.close(alpha, ra, "alpha", "")
    util.close(context, rc, "context", "")


@pytest.mark.points(3)
@pytest.mark.title("the lesson's worked example")
def test_the_lessons_worked_example(sub, ref):
    m = util.build(sub, "BahdanauAttention", 2)
    r = ref.additive.BahdanauAttention(2)
    with torch.no_grad():
        r.Wh.weight.copy_(torch.eye(2))
        r.Ws.weight.copy_(torch.eye(2))
        r.v.weight.copy_(torch.ones(1, 2))
    verdicts.copy_weights(m, r, "BahdanauAttention")
    enc = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])  # h1, h2, h3
    s_prev = torch.tensor([[0.5, 0.5]])
    context, alpha = util.at_size_one(lambda: attend(m, enc, s_prev, None, 1, 3, 2),  # one sentence: B = 1
                                      lambda: right_at_the_usual_sizes(sub, ref), "BahdanauAttention.forward")
    rc, ra = r(enc, s_prev)
    if not verdicts.is_close(alpha.sum(-1), torch.ones(1)):
        verdicts.fail("the weights of alpha do not sum to 1: take the softmax over the source positions (the last dimension).")
    util.close(alpha, ra, "alpha in the lesson's worked example",
               "Score each h_i with v^T tanh(W_h h_i + W_s s), then softmax over i.", atol=1e-3)
    util.close(context, rc, "context in the lesson's worked example",
                 "The context is the alpha-weighted sum of the encoder states.", atol=1e-3)


def tied(r, weight: str):
    """The reference with one projection applied on both sides (Wh or Ws for W_h and W_s): the tied-weights mistake."""
    t = type(r)(r.Wh.weight.size(0))
    t.load_state_dict(r.state_dict())
    with torch.no_grad():
        t.Wh.weight.copy_(getattr(r, weight).weight)
        t.Ws.weight.copy_(getattr(r, weight).weight)
    return t


SCALED = ("alpha looks like a softmax of scaled scores: the lesson's additive attention applies softmax to the scores "
          "as they are, with no temperature, normalisation or other factor on every score.")


def one_scale(alpha: torch.Tensor, ra: torch.Tensor, mask: torch.Tensor) -> bool:
    """Whether alpha is the softmax of the reference's scores times one factor other than 1 (a temperature, espnet's
    scaling, GNMT's normalised v): log alpha = f * log ra + a constant per row, fitted over the real tokens, and the
    softmax of f * log ra reproduces alpha. log ra is the reference's scores less a constant per row."""
    if not isinstance(alpha, torch.Tensor) or alpha.shape != ra.shape or not bool((alpha[mask] > 0).all()):
        return False
    y, x = alpha.detach().double().log(), ra.double().log()
    y, x = y.masked_fill(~mask, 0.0), x.masked_fill(~mask, 0.0)
    count = mask.sum(-1, keepdim=True)
    y, x = (y - y.sum(-1, keepdim=True) / count) * mask, (x - x.sum(-1, keepdim=True) / count) * mask
    spread = float((x * x).sum())
    if spread == 0.0:
        return False
    f = float((x * y).sum()) / spread
    if not f > 0 or abs(f - 1) < 1e-2:
        return False
    return verdicts.is_close(alpha, torch.softmax((f * ra.double().log()).masked_fill(~mask, float("-inf")), -1))


@pytest.mark.points(3)
def test_it_matches_the_reference_on_random_weights(sub, ref):
    m, r, (enc, s_prev, mask) = padded_case(sub, ref)
    context, alpha = attend(m, enc, s_prev, mask, *enc.shape)
    check_alpha(alpha, mask)
    rc, ra = r(enc, s_prev, mask)
    swapped = r(enc.flip(-1), s_prev, mask)[1]  # a reversed feature axis hints at a misplaced transpose
    if verdicts.is_close(alpha, swapped):
        verdicts.fail("alpha looks computed with a transposed weight; apply self.Wh and self.Ws as layers.")
    if not verdicts.is_close(alpha, ra) and one_scale(alpha, ra, mask):
        verdicts.fail(SCALED)
    for weight, other in (("Wh", "Ws"), ("Ws", "Wh")):
        if not verdicts.is_close(alpha, ra) and verdicts.is_close(alpha, tied(r, weight)(enc, s_prev, mask)[1]):
            verdicts.fail(f"alpha looks computed with self.{weight} on both the encoder states and the decoder state: "
                          f"W_h (self.Wh) projects the encoder states, W_s (self.Ws) the decoder state; self.{other} "
                          "is never used.")
    verdicts.close(alpha, ra, "alpha", "Score with v^T tanh(W_h h_i + W_s s_{t-1}): W_h on the encoder states, W_s on the decoder state.")
    verdicts.close(context, rc, "context", "Return the alpha-weighted sum of the encoder states as the context.")


@pytest.mark.points(1)
@pytest.mark.parametrize("s", util.EDGES)
def test_it_handles_edge_sizes(sub, ref, s):
    m, r = pair_of(sub, ref, s.H)
    enc, s_prev = torch.randn(s.B, s.T, s.H), torch.randn(s.B, s.H)
    mask = torch.ones(s.B, s.T, dtype=torch.bool)
    util.attention_at_the_edge(lambda: attend(m, enc, s_prev, mask, s.B, s.T, s.H), r(enc, s_prev, mask),
                               lambda: right_at_the_usual_sizes(sub, ref), "BahdanauAttention", MATCHES,
                               squeeze=" (squeeze(-1))")


@pytest.mark.points(2)
def test_pad_weights_are_exactly_zero_and_rows_sum_to_one(sub, ref):
    m, r, (enc, s_prev, mask) = padded_case(sub, ref)
    context, alpha = attend(m, enc, s_prev, mask, *enc.shape)
    check_alpha(alpha, mask)
    right_values(context, alpha, *r(enc, s_prev, mask))


@pytest.mark.points(2)
def test_noise_written_into_pads_leaves_the_context_unchanged(sub, ref):
    m, r, (enc, s_prev, mask) = padded_case(sub, ref)
    noisy = torch.where(mask[..., None], enc, 100 * torch.randn(enc.shape))
    context, alpha = attend(m, enc, s_prev, mask, *enc.shape)
    if alpha.isnan().any():
        verdicts.fail("alpha contains NaN. " + POLARITY)
    right_values(context, alpha, *r(enc, s_prev, mask))
    context2, _ = attend(m, noisy, s_prev, mask, *enc.shape)
    verdicts.close(context2, context, "the context with noise written into the pad states",
                 "Pad positions must get exactly zero weight, whatever the encoder wrote there.")


@pytest.mark.points(1)
def test_tensors_follow_the_input_device(sub, ref):
    m, r, (enc, s_prev, mask) = padded_case(sub, ref)
    rc, ra = r(enc, s_prev, mask)
    context, alpha = attend(m, enc, s_prev, mask, *enc.shape)
    util.right_on_the_cpu({"alpha": (alpha, ra), "the context": (context, rc)}, MATCHES)  # everything compared below
    on_cuda = util.holding(sub, r, "BahdanauAttention", enc.size(-1))  # a fresh module: the probe moves it
    util.same_on_a_device(on_cuda, enc, s_prev, mask, what="BahdanauAttention.forward",
                          result=pair_result, outs=[util.Out("alpha", (1,), ra), util.Out("the context", (0,), rc)])


@pytest.mark.points(0)
def test_cuda_matches_cpu(sub, ref):
    def alpha_on(dev):
        m, r, (enc, s_prev, mask) = padded_case(sub, ref)
        return attend(m.to(dev), enc.to(dev), s_prev.to(dev), mask.to(dev), *enc.shape)[1], r(enc, s_prev, mask)[1]
    util.cuda_matches_cpu(alpha_on, "alpha")

