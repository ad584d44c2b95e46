"""Hidden cases for the `decoder` piece: AttnDecoder.forward_step and Seq2SeqAttn.forward.

The submission's decoder module is graded with the reference encoder and attention underneath it
(see grader.judge.reference_code), so only the decoder's own code decides these points.
"""
from __future__ import annotations

import pytest
import torch

from grader.lab import artifacts
from grader.judge import verdicts
from grader.lab import toy
from grader.lab import train

from . import util

pytestmark = pytest.mark.piece("decoder")
STEP = "a step matches the reference on random weights"  # the cases whose checks name the usual causes
FORCED = "the model matches the reference under teacher forcing"
HEAD = "Compute the logits with self.head on [h; context], the new h first."


def rows(logits: torch.Tensor) -> torch.Tensor:
    """Logits as the lab takes them: each row up to a constant. Their log-softmax (what PyTorch's translation tutorial
    returns) has the same softmax, argmax, cross-entropy and gradients, so it is compared after the same shift."""
    return logits - logits.logsumexp(-1, keepdim=True)


def logits_close(got, want: torch.Tensor, what: str, hint: str) -> None:
    """util.close for logits, each row up to a constant (the head's output or its log_softmax); probabilities are named."""
    verdicts.tensor(got, what, tuple(want.shape), want.dtype)
    verdicts.finite(got, what, hint)
    if not verdicts.is_close(rows(got), rows(want)) and verdicts.is_close(got, torch.softmax(want, -1)):
        verdicts.fail(f"{what} are probabilities (a softmax over the vocabulary): return the head's output, the logits "
                      "(or their log_softmax); cross-entropy and argmax take logits.")
    util.close(rows(got), rows(want), f"{what} (each row up to a constant)", hint)


def logits_match(got, want: torch.Tensor) -> bool:
    return isinstance(got, torch.Tensor) and got.shape == want.shape and verdicts.is_close(rows(got), rows(want))


def decoder_pair(sub, ref, s: util.Sizes):
    r = ref.decoder.AttnDecoder(s.V, s.E, s.H)
    return util.holding(sub, r, "AttnDecoder", s.V, s.E, s.H), r


def step_inputs(s: util.Sizes, device: str = "cpu"):
    n = util.lengths(s)
    if s.T > 1:
        n[-1] = min(int(n[-1]), s.T - 1)  # a row with pads: attention without the mask shows
    y_prev = torch.randint(1, s.V, (s.B, 1))
    state = (torch.randn(s.B, s.H), torch.randn(s.B, s.H))
    enc = torch.randn(s.B, s.T, s.H)
    mask = util.mask_for(n, s.T)
    return [t.to(device) for t in (y_prev, state[0], state[1], enc, mask)]


def run_step(m, y_prev, h, c, enc, mask, s: util.Sizes, keep: str | None = None):
    out = verdicts.call(m.call, "forward_step", y_prev, (h, c), enc, mask, keep=keep, what="AttnDecoder.forward_step")
    if not isinstance(out, tuple) or len(out) != 3:
        verdicts.fail("forward_step should return (logits, (h, c), alpha)")
    logits, state, alpha = out
    h2, c2 = verdicts.pair(state, "forward_step's new state (h, c)")
    verdicts.tensor(logits, "logits", (s.B, s.V))
    verdicts.tensor(h2, "h", (s.B, s.H))
    verdicts.tensor(c2, "c", (s.B, s.H))
    verdicts.tensor(alpha, "alpha", (s.B, enc.size(1)))
    return logits, h2, c2, alpha


def check_step(m, r, inputs, s: util.Sizes):
    y_prev, h, c, enc, mask = inputs
    logits, h2, c2, alpha = run_step(m, y_prev, h, c, enc, mask, s)
    rl, (rh, rc), ra = r.forward_step(y_prev, (h, c), enc, mask)
    if not verdicts.is_close(alpha, ra):
        check_query(alpha, r, enc, mask, h, c, (rh, h2))
        verdicts.fail("alpha differs from the reference: call self.attn(encoder_outputs, h_prev, src_mask).")
    verdicts.close(h2, rh, "the new h", "Feed the LSTMCell the concatenation [embedding of y_prev; context] and the previous (h, c).")
    verdicts.close(c2, rc, "the new c", "Feed the LSTMCell the previous (h, c) as its state.")
    logits_close(logits, rl, "logits", HEAD)


def check_query(alpha, r, enc, mask, h_prev, c_prev, new_h) -> None:
    """Name the usual wrong calls of the attention by the weights they give (the reference attention has the step's
    weights): the mask left out; the cell state, or the new state, as the query (the reference's new h, or the one
    the student's own cell layout made: the LSTMCell run before attending)."""
    masks = [(mask, False)] + ([(None, True)] if mask is not None and not bool(mask.all()) else [])
    for m, unmasked in masks:
        also = ", and without src_mask (pads got weight)" if unmasked else ""
        fix = "; and pass src_mask to self.attn" if unmasked else ""
        if unmasked and verdicts.is_close(alpha, r.attn(enc, h_prev, m)[1]):
            verdicts.fail("alpha gives weight to pad positions: the attention was called without the mask; pass it: "
                          "self.attn(encoder_outputs, h_prev, src_mask).")
        if verdicts.is_close(alpha, r.attn(enc, c_prev, m)[1]):
            verdicts.fail(f"alpha was computed from the previous cell state c{also}; attend with the previous hidden "
                          f"state h_(t-1) before running the LSTMCell{fix}.")
        if any(verdicts.is_close(alpha, r.attn(enc, h, m)[1]) for h in new_h):
            verdicts.fail(f"alpha was computed from the new hidden state h_t, after the LSTMCell{also}; attend with the "
                          "previous hidden state h_(t-1) that forward_step is given, before running the LSTMCell "
                          f"(whose input is [embedding of y_prev; context]){fix}.")


def step_right(sub, ref) -> bool:
    """Whether one forward_step matches the reference on MAIN sizes: a case on the whole model blames the model's
    loop only when it does, and otherwise sends the student to the step case."""
    s = util.MAIN
    return util.right_elsewhere(lambda: check_step(*decoder_pair(sub, ref, s), step_inputs(s), s))


@pytest.mark.points(4)
def test_a_step_matches_the_reference_on_random_weights(sub, ref):
    s = util.MAIN
    m, r = decoder_pair(sub, ref, s)
    check_step(m, r, step_inputs(s), s)


@pytest.mark.points(1)
@pytest.mark.parametrize("s", util.EDGES)
def test_a_step_handles_edge_sizes(sub, ref, s):
    m, r = decoder_pair(sub, ref, s)
    util.at_size_one(lambda: check_step(m, r, step_inputs(s), s),
                     lambda: check_step(*decoder_pair(sub, ref, util.MAIN), step_inputs(util.MAIN), util.MAIN),
                     "AttnDecoder.forward_step")


GRADS = "gradients reach the attention parameters"


@pytest.mark.points(2)
def test_gradients_reach_the_attention_parameters(sub, ref):
    check_step_grads(sub, ref)


def check_step_grads(sub, ref) -> None:
    s = util.MAIN
    m, r = decoder_pair(sub, ref, s)
    inputs = step_inputs(s)
    check_step(m, r, inputs, s)  # the property is paid only when the values are right
    run_step(m, *inputs, s, keep="out")
    verdicts.call(sub.backward, "out#0", rows=True, what="backward through forward_step")
    grads = m.grads("attn.")
    rl, _, _ = r.forward_step(inputs[0], (inputs[1], inputs[2]), inputs[3], inputs[4])
    rows(rl).square().sum().backward()  # the same loss through the reference step: its gradients are the answer
    for name, p in ((n, p) for n, p in r.named_parameters() if n.startswith("attn.")):
        g = grads.get(name)
        if not isinstance(g, torch.Tensor) or not g.abs().sum() > 0:
            verdicts.fail(f"no gradient reaches {name}: keep the context in the graph (no .detach(), .item() or "
                        "torch.no_grad() on the way to the logits).")
        verdicts.close(g, p.grad, f"the gradient of {name}", "Keep the context in the graph on the way to the logits.")


def model_pair(sub, ref, s: util.Sizes, T_tgt: int):
    r = ref.decoder.Seq2SeqAttn(s.V, s.V + 2, s.E, s.H)
    m = util.holding(sub, r, "Seq2SeqAttn", s.V, s.V + 2, s.E, s.H)
    n = util.lengths(s)
    src, mask = util.src_ids(s, n), util.mask_for(n, s.T)
    tgt = torch.randint(1, s.V + 2, (s.B, T_tgt))
    return m, r, (src, mask, tgt)


def model_result(out):
    """forward's result, checked to be a pair (logits, alpha)."""
    return verdicts.pair(out, "Seq2SeqAttn.forward's result (logits, alpha)")


def run_model(m, src, mask, tgt, s: util.Sizes):
    out = model_result(verdicts.call(m, src, mask, tgt, what="Seq2SeqAttn.forward"))
    verdicts.tensor(out[0], "logits", (s.B, tgt.size(1) - 1, s.V + 2))
    verdicts.tensor(out[1], "alpha", (s.B, tgt.size(1) - 1, src.size(1)))
    return out


@pytest.mark.points(2)
def test_the_model_matches_the_reference_under_teacher_forcing(sub, ref):
    s = util.MAIN
    m, r, (src, mask, tgt) = model_pair(sub, ref, s, T_tgt=6)
    logits, alpha = run_model(m, src, mask, tgt, s)
    rl, ra = r(src, mask, tgt)
    if not (verdicts.is_close(alpha, ra) and logits_match(logits, rl)) and not step_right(sub, ref):
        verdicts.fail("a single forward_step already differs from the reference. " + util.see(STEP))
    util.close(alpha, ra, "alpha", "Start the decoder from the encoder's final (h, c) without the layer dimension, "
                 "and feed tgt[:, t-1:t] at step t (teacher forcing).")
    logits_close(logits, rl, "logits", "Row t-1 of the logits must be the prediction for tgt[:, t], from the true "
                 "previous token.")


@pytest.mark.points(1)
def test_gradients_through_the_model_match_the_reference(sub, ref):
    s = util.MAIN
    m, r, (src, mask, tgt) = model_pair(sub, ref, s, T_tgt=5)
    logits = run_model(m, src, mask, tgt, s)[0]
    rl = r(src, mask, tgt)[0]
    if not logits_match(logits, rl):  # the property is paid only when the values are right
        verdicts.fail("the model's logits differ from the reference. " + util.see(STEP if not step_right(sub, ref) else FORCED))
    if not util.right_elsewhere(lambda: check_step_grads(sub, ref)):
        verdicts.fail("a single step's gradients already differ from the reference. " + util.see(GRADS))
    verdicts.call(m.call, "forward", src, mask, tgt, keep="out", what="Seq2SeqAttn.forward")
    verdicts.call(sub.backward, "out#0", rows=True, what="backward through Seq2SeqAttn.forward")
    grads = verdicts.call(m.grads, "", what="reading the gradients")
    rows(rl).square().sum().backward()  # the same loss through the reference model: its gradients are the answer
    hint = ("Keep every step's logits in the graph on the way to the result (no .detach(), .item(), torch.no_grad() "
            "or new tensors built from their values): the grader trains through them.")
    for name, p in r.named_parameters():
        if p.grad is None:
            continue
        g = grads.get(name) if isinstance(grads, dict) else None
        if not isinstance(g, torch.Tensor):
            verdicts.fail(f"no gradient reaches {name}. {hint}")
        util.close(g, p.grad, f"the gradient of {name}", hint)


@pytest.mark.points(1)
def test_the_model_handles_a_single_sentence(sub, ref):
    s = util.SINGLE_SENTENCE
    m, r, (src, mask, tgt) = model_pair(sub, ref, s, T_tgt=4)
    logits, _ = util.at_size_one(lambda: run_model(m, src, mask, tgt, s), lambda: check_model(sub, ref),
                                 "Seq2SeqAttn.forward")
    rl = r(src, mask, tgt)[0]
    if not logits_match(logits, rl):
        if not step_right(sub, ref):
            verdicts.fail("a single forward_step already differs from the reference. " + util.see(STEP))
        if not util.right_elsewhere(lambda: check_model(sub, ref)):
            verdicts.fail("the model differs from the reference with several sentences too. " + util.see(FORCED))
    logits_close(logits, rl, "logits", "With B = 1, squeeze only the layer dimension of (h, c).")


def check_model(sub, ref) -> None:
    s = util.MAIN
    m, r, (src, mask, tgt) = model_pair(sub, ref, s, T_tgt=6)
    logits_close(run_model(m, src, mask, tgt, s)[0], r(src, mask, tgt)[0], "logits", "")


@pytest.mark.points(1)
def test_tensors_follow_the_input_device(sub, ref):
    s = util.MAIN
    m, r, (src, mask, tgt) = model_pair(sub, ref, s, T_tgt=5)
    (logits, alpha), rl = run_model(m, src, mask, tgt, s), r(src, mask, tgt)
    if not (logits_match(logits, rl[0]) and verdicts.is_close(alpha, rl[1])):  # everything compared below
        verdicts.fail("the CPU result differs from the reference (device-agnostic code must first be right on the "
                    "CPU). " + util.see(STEP if not step_right(sub, ref) else FORCED))
    on_cuda = util.holding(sub, r, "Seq2SeqAttn", s.V, s.V + 2, s.E, s.H)  # a fresh model: the probe moves it
    util.same_on_a_device(on_cuda, src, mask, tgt, what="Seq2SeqAttn.forward", result=model_result,
                          outs=[util.Out("the logits", (0,), rl[0], logits_close), util.Out("alpha", (1,), rl[1])])


@pytest.mark.points(0)
def test_cuda_matches_cpu(sub, ref):
    def logits_on(dev):
        m, r, (src, mask, tgt) = model_pair(sub, ref, util.MAIN, T_tgt=5)
        logits, _ = run_model(m.to(dev), src.to(dev), mask.to(dev), tgt.to(dev), util.MAIN)
        return rows(logits.cpu()), rows(r(src, mask, tgt)[0])  # each row up to a constant, as the lab takes logits
    util.cuda_matches_cpu(logits_on, "logits", " (each row up to a constant)")


@pytest.mark.points(5)
@pytest.mark.slow
@pytest.mark.needs("test_a_step_matches_the_reference_on_random_weights", "test_gradients_reach_the_attention_parameters",
                   "test_the_model_matches_the_reference_under_teacher_forcing",
                   "test_gradients_through_the_model_match_the_reference")
@pytest.mark.timeout(900)  # a few seconds on 2 idle cores; generous for busy machines
def test_trained_by_the_grader_it_translates_length_30_sentences(sub, ref, progress):
    cfg = train.graded()
    verdicts.call(sub.seed_worker, cfg.seed, what="seeding")
    model = util.build(sub, "Seq2SeqAttn", len(toy.SRC_ITOS), len(toy.TGT_ITOS), cfg.embed_dim, cfg.hidden_dim)
    # every parameter from the reference's run, train.WARM_STEP['bahdanau'] steps in: still well short of 0.90 at length 30
    judge = ref.decoder.Seq2SeqAttn(len(toy.SRC_ITOS), len(toy.TGT_ITOS), cfg.embed_dim, cfg.hidden_dim)
    acc = util.graded_training(model, cfg, artifacts.load_warm_start(), "your Seq2SeqAttn",
                               "keep the constructor as given (self.encoder, self.decoder.attn)", judge, progress)
    if acc < 0.90:
        said = (f"After the grader's training run your model reaches {acc:.3f} greedy token accuracy at source length "
                "30; it needs 0.90.")
        if not step_right(sub, ref):
            verdicts.fail(f"{said} A single forward_step differs from the reference. " + util.see(STEP))
        if not util.right_elsewhere(lambda: check_model(sub, ref)):
            verdicts.fail(f"{said} " + util.see(FORCED))
        verdicts.fail(f"{said} Your forward's values are right, so look at the gradient: keep everything on the way to "
                    "the logits in the graph (no .detach(), .item() or torch.no_grad()).")
