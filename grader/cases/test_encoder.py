"""Hidden cases for the `encoder` piece: EncoderAll.forward."""
from __future__ import annotations

import pytest
import torch

from grader.judge import verdicts
from grader.judge.workers import RemoteError
from . import util

pytestmark = pytest.mark.piece("encoder")
EVERY_STEP = "it returns an output for every time step"  # the cases whose checks name the usual causes
MATCHES = "it matches the reference on random weights"


def pair_of(sub, ref, s: util.Sizes):
    r = ref.encoder.EncoderAll(s.V, s.E, s.H)
    return util.holding(sub, r, "EncoderAll", s.V, s.E, s.H), r


def main_case(sub, ref):
    """The encoder pair on MAIN sizes and a batch of source ids without pads, in the order the cases draw them."""
    s = util.MAIN
    m, r = pair_of(sub, ref, s)
    return m, r, torch.randint(1, s.V, (s.B, s.T))


def run(m, src, what="EncoderAll.forward", keep=None):
    outputs, (h, c) = result(verdicts.call(m.call, "__call__", src, keep=keep, what=what), what)
    return outputs, h, c


def result(out, what="EncoderAll.forward"):
    """forward's result, checked to be laid out as (outputs, (h, c))."""
    outputs, state = verdicts.pair(out, f"{what}'s result (outputs, (h, c))")
    return outputs, verdicts.pair(state, f"{what}'s second result (h, c)")


def check_same(m, r, src, s: util.Sizes, edge: bool = False):
    outputs, h, c = run(m, src)
    shapes_right(outputs, h, c, s, src.size(1), here=edge)  # a shape wrong only at an edge size is that case's to name
    ro, rh, rc = r(src)[0], *r(src)[1]
    if verdicts.is_close(h, rc) and verdicts.is_close(c, rh):
        verdicts.fail("h and c are swapped: the LSTM returns (h, c) in that order, the hidden state first.")
    util.close(outputs, ro, "outputs", "Return the LSTM output at every position: embed, then run self.rnn on the whole sequence.")
    util.close(h, rh, "h", "h should be the LSTM's final hidden state, shape (1, B, H).")
    util.close(c, rc, "c", "c should be the LSTM's final cell state, shape (1, B, H).")


def shapes_right(outputs, h, c, s: util.Sizes, T: int, here: bool = False) -> None:
    """The three shapes; a wrong one is named in the first case and pointed at from the others."""
    for name, x, shape in (("outputs", outputs, (s.B, T, s.H)), ("h", h, (1, s.B, s.H)), ("c", c, (1, s.B, s.H))):
        verdicts.tensor(x, name, None, torch.float32)
        if tuple(x.shape) == shape:
            continue
        if not here:
            verdicts.fail(f"{name} has the wrong shape. " + util.see(EVERY_STEP))
        if name == "outputs" and x.dim() == 3 and x.size(1) == 1 and T > 1:
            verdicts.fail("outputs holds one time step: return the LSTM's output at every position (B, T_src, H), "
                        "not only its final state.")
        verdicts.tensor(x, name, shape)


@pytest.mark.points(2)
def test_it_returns_an_output_for_every_time_step(sub, ref):
    s = util.MAIN
    m, _ = pair_of(sub, ref, s)
    outputs, h, c = run(m, torch.randint(1, s.V, (s.B, s.T)))
    shapes_right(outputs, h, c, s, s.T, here=True)
    for name, t in (("outputs", outputs), ("h", h), ("c", c)):
        verdicts.finite(t, name)


@pytest.mark.points(3)
def test_it_matches_the_reference_on_random_weights(sub, ref):
    m, r, src = main_case(sub, ref)
    check_same(m, r, src, util.MAIN)


@pytest.mark.points(2)
def test_gradients_flow_from_every_output_back_to_the_encoder(sub, ref):
    m, r, src = main_case(sub, ref)
    check_same(m, r, src, util.MAIN)  # the property is paid only when the values are right
    run(m, src, keep="out")
    try:
        sub.backward("out#0")
    except RemoteError as e:
        if "does not require grad" not in str(e):
            raise verdicts.student_failure(e, "backward from the encoder outputs") from None
        verdicts.fail("the outputs are cut from the graph, so no gradient can reach the encoder: return them as they are "
                    "(no .detach(), .data or torch.no_grad()).")
    grads = m.grads()
    r(src)[0].square().sum().backward()  # the same loss on the reference: the gradients must be its gradients
    for name, p in r.named_parameters():
        g = grads.get(name)
        if not isinstance(g, torch.Tensor) or not g.abs().sum() > 0:
            verdicts.fail(f"no gradient reaches {name} from the outputs: attention trains the encoder through every "
                        "output, so keep them in the graph (no .detach(), .data or torch.no_grad()).")
        verdicts.close(g, p.grad, f"the gradient of {name}", "Return the LSTM's outputs as they are, still in the graph.")


@pytest.mark.points(1)
@pytest.mark.parametrize("s", util.EDGES)
def test_it_handles_edge_sizes(sub, ref, s):
    m, r = pair_of(sub, ref, s)
    util.at_size_one(lambda: check_same(m, r, torch.randint(1, s.V, (s.B, s.T)), s, edge=True),
                     lambda: check_same(*main_case(sub, ref), util.MAIN),
                     "EncoderAll.forward")


@pytest.mark.points(2)
def test_a_padded_row_equals_the_sentence_run_alone(sub, ref):
    s = util.MAIN
    m, r = pair_of(sub, ref, s)
    n = util.lengths(s)
    src = util.src_ids(s, n)
    outputs, h, c = run(m, src)
    shapes_right(outputs, h, c, s, s.T)
    # row 0 has no pads: a mistake there is not about padding, and the first two cases name it
    if not (verdicts.is_close(outputs[0], r(src[:1])[0][0]) and verdicts.is_close(h[:, 0], r(src[:1])[1][0][:, 0])):
        verdicts.fail("a row without pads already differs from the reference. " + util.see(MATCHES))
    for b in range(s.B):
        k = int(n[b])
        alone, (ha, ca) = r(src[b : b + 1, :k])
        verdicts.close(outputs[b, :k], alone[0], "outputs at the real positions of a padded row",
                     "A sentence's outputs must not depend on the pads after it or on other rows of the batch.")
        # the lesson's encoder runs over the pads too; packing stops at the last real token: both are fine
        full_h = r(src)[1][0][:, b]
        if not (verdicts.is_close(h[:, b], full_h) or verdicts.is_close(h[:, b], ha[:, 0])):
            verdicts.fail("h of a padded row is neither the state after its pads nor after its last real token.")


@pytest.mark.points(1)
def test_tensors_follow_the_input_device(sub, ref):
    s = util.MAIN
    m, r, src = main_case(sub, ref)
    check_same(m, r, src, s)  # device-agnostic code must first be right on the CPU
    hint = util.NEW_TENSORS + (util.PACKING if "pack_padded_sequence" in sub.source else "")
    ro, (rh, rc) = r(src)
    on_cuda = util.holding(sub, r, "EncoderAll", s.V, s.E, s.H)  # a fresh module: the probe moves it to the device
    util.same_on_a_device(on_cuda, src, what="EncoderAll.forward", hint=hint, result=result,
                          outs=[util.Out("outputs", (0,), ro), util.Out("h", (1, 0), rh), util.Out("c", (1, 1), rc)])


@pytest.mark.points(0)
def test_cuda_matches_cpu(sub, ref):
    def outputs_on(dev):
        m, r, src = main_case(sub, ref)
        return run(m.to(dev), src.to(dev))[0], r(src)[0]
    util.cuda_matches_cpu(outputs_on, "outputs")

