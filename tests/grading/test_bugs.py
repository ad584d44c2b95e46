"""A set of realistic student bugs: each must lose points on its own piece and on no other."""
from __future__ import annotations

import functools
import re
import tempfile
from pathlib import Path

import pytest

from grader.core.pieces import PIECES
from grader.runner.report import title

from helpers import grade_dict, make_submission, scores

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

ADD_MASK = 'scores = scores.masked_fill(~src_mask, float("-inf"))\n        alpha = torch.softmax(scores, dim=-1)  # (B, T_src)\n        return attention_context'

BUGS = {
    "unmasked pads": ("additive", [("if src_mask is not None:\n            scores = scores.masked_fill", "if False:\n            scores = scores.masked_fill")]),
    "inverted mask": ("additive", [("masked_fill(~src_mask", "masked_fill(src_mask")]),
    "softmax over the batch": ("additive", [("alpha = torch.softmax(scores, dim=-1)", "alpha = torch.softmax(scores, dim=0)")]),
    "W_h and W_s swapped": ("additive", [("keys = 2 * self.Wh(encoder_outputs)", "keys = 2 * self.Ws(encoder_outputs)"),
                                         ("query = 2 * self.Ws(decoder_state)", "query = 2 * self.Wh(decoder_state)")]),
    "no scaling": ("luong", [("scores = scores / d**0.5", "scores = scores")]),
    "divided by d": ("luong", [("scores = scores / d**0.5", "scores = scores / d")]),
    "scaled by the sentence length": ("luong", [("scores = scores / d**0.5", "scores = scores / encoder_outputs.size(1) ** 0.5")]),
    "luong unmasked": ("luong", [("if src_mask is not None:\n            scores = scores.masked_fill",
                                  "if False:\n            scores = scores.masked_fill")]),
    "luong softmax over the batch": ("luong", [("alpha = torch.softmax(scores, dim=-1)", "alpha = torch.softmax(scores, dim=0)")]),
    "last state only": ("encoder", [("return outputs, (h, c)", "return h.transpose(0, 1), (h, c)")]),
    "h and c swapped": ("encoder", [("return outputs, (h, c)", "return outputs, (c, h)")]),
    "encoder outputs detached": ("encoder", [("return outputs, (h, c)", "return outputs.detach(), (h, c)")]),
    "mean of per-sentence accuracies": ("evaluation", [(
        "int(n): (correct[lengths == n].sum() / total[lengths == n].sum()).item()",
        "int(n): (correct[lengths == n] / total[lengths == n]).mean().item()")]),
    "loop over positions": ("context", [(
        "return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)",
        "return sum(alpha[:, i : i + 1] * encoder_outputs[:, i] for i in range(alpha.size(1)))")]),
    "squeeze everything": ("context", [("encoder_outputs).squeeze(1)", "encoder_outputs).squeeze()")]),
    "transposed bmm": ("context", [("torch.bmm(alpha.unsqueeze(1), encoder_outputs)",
                                    "torch.bmm(alpha.unsqueeze(1), encoder_outputs.transpose(1, 2))")]),
    "wrong query state": ("decoder", [("self.attn(encoder_outputs, h_prev, src_mask)", "self.attn(encoder_outputs, c_prev, src_mask)")]),
    "context detached": ("decoder", [("context, alpha = self.attn(encoder_outputs, h_prev, src_mask)",
                                      "context, alpha = self.attn(encoder_outputs, h_prev, src_mask)\n        context = context.detach()")]),
    "tensors made on the CPU": ("decoder", [(
        "return torch.stack(all_logits, dim=1), torch.stack(all_alpha, dim=1)",
        "out = torch.zeros(tgt.size(0), tgt.size(1) - 1, self.tgt_vocab)\n"
        "        for i, step_logits in enumerate(all_logits):\n"
        "            out[:, i] = step_logits\n"
        "        return out, torch.stack(all_alpha, dim=1)")]),
    "teacher forcing in evaluation": ("evaluation", [(
        "pred, _ = greedy_decode(model, src, src_mask, tgt[:, :1], tgt.size(1) - 1)",
        "pred = model(src, src_mask, tgt)[0].argmax(-1)")]),
    "pads counted in accuracy": ("evaluation", [("real = gold != 0", "real = torch.ones_like(gold, dtype=torch.bool)")]),
    "scored against the inputs": ("evaluation", [("gold = tgt[:, 1:]", "gold = tgt[:, :-1]")]),
    # issue 24: causes the hints used to leave unnamed
    "attention called without the mask": ("decoder", [("self.attn(encoder_outputs, h_prev, src_mask)",
                                                       "self.attn(encoder_outputs, h_prev)")]),
    "attends with the new state": ("decoder", [(  # the LSTMCell first (its own layout), then attention with its h
        "        context, alpha = self.attn(encoder_outputs, h_prev, src_mask)  # the query is s_{t-1}\n"
        "        h, c = self.rnn(torch.cat([e, context], dim=-1), (h_prev, c_prev))  # (B, H) each\n",
        "        h, c = self.rnn(torch.cat([e, h_prev], dim=-1), (h_prev, c_prev))\n"
        "        context, alpha = self.attn(encoder_outputs, h, src_mask)\n")]),
    "probabilities for logits": ("decoder", [("logits = self.head(torch.cat([h, context], dim=-1))",
                                              "logits = torch.softmax(self.head(torch.cat([h, context], dim=-1)), -1)")]),
    "decoder squeeze() without a dim": ("decoder", [("e = self.embed(y_prev).squeeze(1)", "e = self.embed(y_prev).squeeze()")]),
    "scores squeeze() without a dim": ("additive", [("self.v(torch.sigmoid(keys + query)).squeeze(-1)",
                                                     "self.v(torch.sigmoid(keys + query)).squeeze()")]),
    "no softmax, tied projections": ("additive", [("alpha = torch.softmax(scores, dim=-1)", "alpha = scores"),
                                                  ("query = 2 * self.Ws(decoder_state)", "query = 2 * self.Wh(decoder_state)")]),
    "tied projections": ("additive", [("query = 2 * self.Ws(decoder_state)", "query = 2 * self.Wh(decoder_state)")]),
    "a context buffer made on the CPU": ("context", [(
        "    return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)",
        "    out = torch.zeros(alpha.size(0), encoder_outputs.size(-1))  # no device=: on the CPU\n"
        "    return out + torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)")]),
    "packed with a state made on the CPU": ("encoder", [(
        "        e = self.embed(src)  # (B, T_src, E)\n        outputs, (h, c) = self.rnn(e)  # (B, T_src, H); (1, B, H) each\n",
        "        lengths = (src != 0).sum(1)\n"
        "        packed = nn.utils.rnn.pack_padded_sequence(self.embed(src), lengths.cpu(), batch_first=True,\n"
        "                                                   enforce_sorted=False)\n"
        "        zeros = torch.zeros(1, src.size(0), self.rnn.hidden_size)  # no device=: on the CPU\n"
        "        outputs, (h, c) = self.rnn(packed, (zeros, zeros))\n"
        "        outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs, batch_first=True, total_length=src.size(1))\n")]),
    # issue 31: what real CUDA refuses and the stand-in let through
    "packed with the lengths on the device": ("encoder", [(
        "        e = self.embed(src)  # (B, T_src, E)\n        outputs, (h, c) = self.rnn(e)  # (B, T_src, H); (1, B, H) each\n",
        "        lengths = (src != 0).sum(1)  # on the inputs' device\n"
        "        packed = nn.utils.rnn.pack_padded_sequence(self.embed(src), lengths, batch_first=True,\n"
        "                                                   enforce_sorted=False)\n"
        "        outputs, (h, c) = self.rnn(packed)\n"
        "        outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs, batch_first=True, total_length=src.size(1))\n")]),
    "<sos> picked with a CPU index": ("decoder", [("y_prev = tgt[:, :1]  # (B, 1), <sos>",
                                                   "y_prev = tgt.index_select(1, torch.tensor(0))  # (B, 1), <sos>")]),
}
ORDER = list(PIECES)
# what a case that names the cause says, for each bug; a case that cannot name it points to one that does
CAUSES = {
    "unmasked pads": r"pad positions: set their scores to -inf",
    "inverted mask": r"src_mask is True at real tokens .* what you fill is the pads, not the real tokens",
    "softmax over the batch": r"softmax over the source positions",
    "W_h and W_s swapped": r"W_h on the encoder states, W_s on the decoder state",
    "no scaling": r"unscaled: divide the dot products by sqrt\(d\)",
    "divided by d": r"divided by d: divide the dot products by sqrt\(d\), not by d",
    "scaled by the sentence length": r"square root of the sentence length",
    "luong unmasked": r"pad positions: set their scores to -inf",
    "luong softmax over the batch": r"softmax over the source positions",
    "last state only": r"output at every position .* not only its final state",
    "h and c swapped": r"h and c are swapped",
    "encoder outputs detached": r"cut from the graph.*\.detach\(\)",
    "mean of per-sentence accuracies": r"means of per-sentence accuracies",
    "loop over positions": r"Python loop",
    "squeeze everything": r"check which dimensions you squeeze",
    "transposed bmm": r"A shape does not fit: attention_context takes alpha \(B, T_src\) and encoder_outputs "
                      r"\(B, T_src, H\)",
    "wrong query state": r"computed from the previous cell state c",
    "context detached": r"keep the context in the graph \(no \.detach\(\)",
    "tensors made on the CPU": r"on the CPU, not on the inputs' device.*device=src\.device",
    "a context buffer made on the CPU": r"attention_context mixed a tensor made on the CPU with the inputs",
    "teacher forcing in evaluation": r"teacher-forced accuracies",
    "pads counted in accuracy": r"pad positions are being counted",
    "scored against the inputs": r"the token fed in at that step .* compare with tgt\[:, 1:\]",
    "attention called without the mask": r"without the mask; pass it",
    # in its own layout the LSTMCell's input is [embedding; h_prev]: where alpha cannot tell (T_src = 1), h does
    "attends with the new state": r"computed from the new hidden state h_t, after the LSTMCell|Feed the LSTMCell the "
                                  r"concatenation \[embedding of y_prev; context\]",
    "probabilities for logits": r"are probabilities \(a softmax over the vocabulary\)",
    "decoder squeeze() without a dim": r"raises at size 1: squeeze\(\) without a dimension",
    "scores squeeze() without a dim": r"raises at size 1: squeeze\(\) without a dimension",
    "no softmax, tied projections": r"not a softmax|take the softmax",
    "tied projections": r"self\.Wh on both the encoder states and the decoder state",
    "packed with a state made on the CPU": r"mixed a tensor made on the CPU with the inputs.*only pack_padded_sequence's "
                                           r"lengths stay on the CPU",
    "packed with the lengths on the device": r"gave pack_padded_sequence its lengths on the device.*only "
                                             r"pack_padded_sequence's lengths stay on the CPU \(lengths\.cpu\(\)\)",
    "<sos> picked with a CPU index": r"Seq2SeqAttn\.forward mixed a tensor made on the CPU with the inputs",
}
POINTER = re.compile(r"See the case '([^']+)' for the cause\.")


@functools.cache
def graded(bug: str) -> dict:
    """The bug's piece and the next one, graded once for both tests (quick: the training cases are left out)."""
    piece, edits = BUGS[bug]
    # every piece runs in its own process that imports only its own file, so one neighbour stands for the rest
    neighbour = ORDER[(ORDER.index(piece) + 1) % len(ORDER)]
    with tempfile.TemporaryDirectory(prefix="attnlab-bug-") as tmp:
        return grade_dict(make_submission(Path(tmp) / "sub", {piece: edits}), [piece, neighbour])


@pytest.mark.parametrize("bug", list(BUGS))
def test_a_bug_loses_points_on_its_own_piece_only(bug):
    piece, _ = BUGS[bug]
    neighbour = ORDER[(ORDER.index(piece) + 1) % len(ORDER)]
    report = graded(bug)
    got = scores(report)
    assert got[piece][0] < got[piece][1], f"{bug}: {piece} kept full marks"
    assert got[neighbour][0] == got[neighbour][1], f"{bug}: {neighbour} lost points"
    messages = [c["message"] for p in report["pieces"] for c in p["cases"] if not c["passed"] and not c["skipped"]]
    assert messages and all(messages), "every failed case says why"
    assert not any("Traceback" in m for m in messages)


def test_a_device_bug_loses_the_device_point_and_nothing_else():
    """A tensor made on the CPU inside forward (torch.zeros without device=) is right on the CPU and wrong on a GPU:
    the stand-in CUDA device of the device case sees it on every machine, and only that case's point is lost."""
    for bug in ("tensors made on the CPU", "packed with a state made on the CPU", "a context buffer made on the CPU",
                "packed with the lengths on the device", "<sos> picked with a CPU index"):
        piece, _ = BUGS[bug]
        report = graded(bug)
        got = scores(report)
        failed = [c for p in report["pieces"] for c in p["cases"] if not c["passed"] and not c["skipped"]]
        assert [(c["name"], c["max_points"]) for c in failed] == [("test_tensors_follow_the_input_device", 1)], failed
        assert got[piece] == (got[piece][1] - 1, got[piece][1])


def test_every_bug_has_its_cause_written_down():
    assert set(CAUSES) == set(BUGS)


@pytest.mark.parametrize("bug", list(BUGS))
def test_every_failed_case_names_the_bugs_cause_or_points_to_a_case_that_does(bug):
    piece, _ = BUGS[bug]
    failed = {title(c["name"]): c["message"] for p in graded(bug)["pieces"] if p["name"] == piece for c in p["cases"]
              if not c["passed"] and not c["skipped"]}
    naming = {name for name, message in failed.items() if re.search(CAUSES[bug], message)}
    assert naming, f"{bug}: no failed case names the cause: {failed}"
    assert not any("~src_mask" in m for m in failed.values()), "a hint points at the fix, never writes it out"
    for name, message in failed.items():
        if name in naming:
            continue
        pointer = POINTER.search(message)
        assert pointer, f"{bug}: {name!r} neither names the cause nor points to a case that does: {message}"
        assert pointer[1] in naming, f"{bug}: {name!r} points to {pointer[1]!r}, which does not name the cause"
