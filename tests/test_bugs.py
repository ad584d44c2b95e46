"""A set of realistic student bugs: each must lose points on its own piece and on no other."""
from __future__ import annotations

import pytest

from conftest import grade_dict, scores
from grader.pieces import PIECES

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
}
ORDER = list(PIECES)


@pytest.mark.parametrize("bug", list(BUGS))
def test_a_bug_loses_points_on_its_own_piece_only(lab, bug):
    piece, edits = BUGS[bug]
    sub = lab(edits={piece: edits})
    # every piece runs in its own process that imports only its own file, so one neighbour stands for the rest
    neighbour = ORDER[(ORDER.index(piece) + 1) % len(ORDER)]
    report = grade_dict(sub, [piece, neighbour])
    got = scores(report)
    assert got[piece][0] < got[piece][1], f"{bug}: {piece} kept full marks"
    assert got[neighbour][0] == got[neighbour][1], f"{bug}: {neighbour} lost points"
    messages = [c["message"] for p in report["pieces"] for c in p["cases"] if not c["passed"] and not c["skipped"]]
    assert messages and all(messages), "every failed case says why"
    assert not any("Traceback" in m for m in messages)
