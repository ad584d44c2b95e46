"""The similarity report against students who want a copy unseen, and earlier terms that could frame the honest.

Found by a red-team round on the known sources (issue 41): xena writes her own additive scores and yuri hands them
in renamed. Each attack below once dropped that pair from the page, or put an honest student under a source.
"""
from __future__ import annotations

import textwrap

import pytest

from grader import REFERENCE
from grader.core.pieces import MODULES
from grader.regrade import similarity, similarity_input

from .test_similarity import CAROL, DAVE, as_bob, solve, stub
from .test_similarity_scores import made_up_class
from .test_similarity_sources import renamed, write

pytest.importorskip("copydetect")

XENA_BODY = """
    n_batch, n_src, n_hid = encoder_outputs.shape
    pk = self.Wh(encoder_outputs.reshape(-1, n_hid)).view(n_batch, n_src, n_hid)
    pq = self.Ws(decoder_state).reshape(n_batch, 1, n_hid).repeat(1, n_src, 1)
    en = torch.stack([self.v(torch.tanh(pk[:, t] + pq[:, t])).flatten() for t in range(n_src)], dim=1)
    if src_mask is not None:
        en = en + torch.log(src_mask.to(en.dtype))
    wt = torch.exp(en - en.max(dim=1, keepdim=True).values)
    wt = wt / wt.sum(dim=1, keepdim=True)
    return attention_context(wt, encoder_outputs), wt
"""
EVE_BODY = """
    hs = encoder_outputs
    st = decoder_state.unsqueeze(-2).expand_as(hs)
    sc = self.v(torch.tanh(self.Wh(hs) + self.Ws(st))).squeeze(-1)
    if src_mask is not None:
        sc = sc.masked_fill(src_mask.logical_not(), -1e30)
    pr = sc.softmax(dim=-1).nan_to_num(0.0)
    return attention_context(pr, hs), pr
"""
XENA = solve("additive", {"BahdanauAttention.forward": XENA_BODY})
EVE = solve("additive", {"BahdanauAttention.forward": EVE_BODY})
RAISE = "        raise NotImplementedError(\"piece 'additive': write BahdanauAttention.forward\")\n"
# a class of twenty-odd: three or four holding one file is then not a fifth of it, not the assignment's
HONEST = {"carol": CAROL, "dave": DAVE, "bob": {m: as_bob(m) for m in MODULES}, **made_up_class(18, 5)}


def solution(module: str = "additive") -> str:
    """The reference's solution lines alone."""
    text = (REFERENCE / f"{module}.py").read_text()
    return text.split("### BEGIN SOLUTION\n", 1)[1].split("### END SOLUTION", 1)[0].rsplit("\n", 1)[0] + "\n"


def answer(lines: str) -> str:
    return textwrap.indent(textwrap.dedent(lines).strip("\n") + "\n", " " * 8)


def pairs_of(tmp_path, files: dict, known: list | None = None) -> tuple[list[tuple[str, str]], object]:
    code = write(tmp_path / "CODE", {**HONEST, **files})
    found = similarity.report(code, tmp_path / "r.html", known=similarity_input.known(known or [])[0])
    return [(p["a"], p["b"]) for p in found.pairs], found


def test_a_copy_padded_on_both_sides_with_the_reference_as_dead_code_stays_a_pair(tmp_path):
    pad = "\n    def _draft(self, encoder_outputs, decoder_state, src_mask=None):\n" + solution()
    pairs, found = pairs_of(tmp_path, {"xena": {"additive": XENA + pad}, "yuri": {"additive": renamed(XENA) + pad}})
    assert ("xena", "yuri") in pairs and found.pairs[0]["explained"] == {}


def test_a_short_file_from_an_earlier_term_explains_no_copy_and_frames_nobody(tmp_path):
    zed = stub("additive").replace(RAISE, answer("\n".join(XENA_BODY.strip("\n").splitlines()[:3])))  # xena's opening
    last = write(tmp_path / "2025-fall", {"zed": {"additive": zed}})
    pairs, found = pairs_of(tmp_path, {"xena": {"additive": XENA}, "yuri": {"additive": renamed(XENA)}}, [last])
    assert ("xena", "yuri") in pairs and not any(s["source"] == "2025-fall/zed" for s in found.sources)


def test_two_who_hand_in_half_the_reference_and_the_same_code_of_their_own_stay_a_pair(tmp_path):
    half = solution().splitlines(keepends=True)
    own = answer("\n".join(XENA_BODY.strip("\n").splitlines()[:-1]))  # all but her return
    mixed = stub("additive").replace(RAISE, "".join(half[:len(half) // 2]) + own + "".join(half[len(half) // 2:]))
    pairs, _ = pairs_of(tmp_path, {"xena": {"additive": mixed}, "yuri": {"additive": mixed}})
    assert ("xena", "yuri") in pairs


def test_form_feeds_in_a_comment_do_not_blank_the_copied_code(tmp_path):
    def hidden(text: str) -> str:
        """The answer and all after it behind a comment of form feeds, one a line of it; a dead string at the end."""
        lines = text.splitlines(keepends=True)
        start = next(i for i, x in enumerate(lines) if i > 20 and x.strip().startswith('"""')) + 1  # forward's body
        size = len(lines) - start
        dead = '        """\n' + "        notes\n" * (2 * size + 2) + '        """\n'
        out = "".join(lines[:start] + ["        # " + "\x0c" * size + "\n"] + lines[start:] + [dead])
        compile(out, "additive.py", "exec")  # it runs the same
        return out

    assert "n_batch" in similarity_input.written(hidden(XENA), stub("additive"))
    pairs, _ = pairs_of(tmp_path, {"xena": {"additive": hidden(XENA)}, "yuri": {"additive": hidden(renamed(XENA))}})
    assert ("xena", "yuri") in pairs


def test_a_file_that_holds_anothers_makes_no_group_of_them(tmp_path):
    extra = ("\n    def extra(self, a, b):\n        total = 0\n        for i in range(len(a)):\n"
             "            for j in range(len(b)):\n                total += (a[i] * b[j]).sum().item() ** 2 / (1 + i + j)\n"
             "        return torch.tensor(total).sqrt().clamp(min=0, max=1e6).log1p()\n")
    bridge = XENA + "\n    def forward2(self, encoder_outputs, decoder_state, src_mask=None):\n" + answer(EVE_BODY)
    pairs, found = pairs_of(tmp_path, {"xena": {"additive": XENA}, "yuri": {"additive": renamed(XENA)},
                                       "zack": {"additive": XENA + extra}, "eve": {"additive": EVE},
                                       "fred": {"additive": renamed(EVE)}, "dora": {"additive": bridge}})
    assert found.groups == []
    assert {("xena", "yuri"), ("eve", "fred"), ("xena", "zack"), ("dora", "xena")} <= set(pairs)


def test_known_folders_say_what_they_leave_out_and_never_replace_one_another(tmp_path):
    one = write(tmp_path / "a" / "2025-fall", {"olga": DAVE})
    two = write(tmp_path / "b" / "2025-fall", {"olga": CAROL})
    mixed = write(tmp_path / "mixed", {"ana": DAVE})
    (mixed / "additive.py").write_text(CAROL["additive"])
    named = write(tmp_path / "c", {"the reference": CAROL})
    sources, notes = similarity_input.known([one, two, mixed, named / "the reference"])
    assert sources["2025-fall/olga"] == DAVE and sources["the reference"] == similarity_input.reference().get(
        "the reference", CAROL)
    assert "known source 2025-fall/olga: skipped (a known source of that name is given already)" in notes
    assert any(n.startswith("known source mixed: read as one source") and "1 folder(s) were not read" in n
               for n in notes)
