"""The similarity report on a class of twelve: ten honest solutions and two planted copies (issue 32).

The ten write the encoder, the context and the additive scores each their own way, but as a real class does:
the lines the task dictates (the mask filled with -inf, the softmax over the last dimension, the reference's
one-line context) come back again and again, byte for byte. kim hands in ana's three files unchanged (her
encoder and context are too short for the fragments alone to tell); lee hands in eli's additive scores and
encoder with every name changed, his own comments and another layout. Exactly those two pairs are flagged.
"""
from __future__ import annotations

import re

import pytest

from grader.core.pieces import MODULES
from grader.regrade import similarity

from .test_similarity import solve

pytest.importorskip("copydetect")

TAKEN = ("encoder", "context", "additive")  # the pieces this class hands in; the others are left out
ENCODER = {  # EncoderAll.forward, ten ways
    "ana": """
        vectors = self.embed.forward(src)
        seq_out, hc = self.rnn.forward(vectors)
        return seq_out, tuple(hc)
    """,
    "ben": "return self.rnn(self.embed(src))",
    "cleo": """
        e = self.embed(src)  # (B, T_src, E)
        outputs, (h, c) = self.rnn(e)  # (B, T_src, H); (1, B, H) each
        return outputs, (h, c)
    """,  # the reference's lines, docstring names and all, as cleo, fay and juno each write them
    "dev": """
        x = self.embed(src)
        out, (hn, cn) = self.rnn(x)
        return out, (hn, cn)
    """,
    "eli": """
        batch = src.size(0)
        x = self.embed(src)
        h0 = x.new_zeros(1, batch, self.rnn.hidden_size)
        c0 = torch.zeros_like(h0)
        outputs, (h, c) = self.rnn(x, (h0, c0))
        return outputs, (h, c)
    """,
    "fay": """
        e = self.embed(src)  # (B, T_src, E)
        outputs, (h, c) = self.rnn(e)  # (B, T_src, H); (1, B, H) each
        return outputs, (h, c)
    """,
    "gus": """
        lengths = (src != 0).sum(dim=1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.embed(src), lengths, batch_first=True, enforce_sorted=False)
        out, (h, c) = self.rnn(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        return out, (h, c)
    """,
    "hana": """
        outputs, (h_n, c_n) = self.rnn(self.embed(src))
        return outputs, (h_n, c_n)
    """,
    "ivo": """
        emb = self.embed(src)
        result = self.rnn(emb)
        outputs, final = result
        return outputs, (final[0], final[1])
    """,
    "juno": """
        e = self.embed(src)  # (B, T, E)
        outputs, (h, c) = self.rnn(e)
        return outputs, (h, c)
    """,
}
CONTEXT = {  # attention_context: the reference's one line three times, then seven others
    "ana": "return (alpha.unsqueeze(-1) * encoder_outputs).sum(dim=1)",
    "ben": 'return torch.einsum("bt,bth->bh", alpha, encoder_outputs)',
    "cleo": "return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)",
    "dev": "return torch.bmm(alpha[:, None, :], encoder_outputs)[:, 0, :]",
    "eli": "return torch.matmul(alpha.unsqueeze(1), encoder_outputs).squeeze(1)",
    "fay": "return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)",
    "gus": """
        weighted = alpha.unsqueeze(2) * encoder_outputs
        return weighted.sum(1)
    """,
    "hana": "return torch.bmm(alpha.unsqueeze(1), encoder_outputs).squeeze(1)",
    "ivo": "return (alpha.unsqueeze(1) @ encoder_outputs).squeeze(1)",
    "juno": """
        B, T = alpha.shape
        return torch.bmm(alpha.view(B, 1, T), encoder_outputs).view(B, -1)
    """,
}
ADDITIVE = {  # BahdanauAttention.forward
    "ana": """
        keys = self.Wh(encoder_outputs)
        query = self.Ws(decoder_state).unsqueeze(1)
        scores = self.v(torch.tanh(keys + query)).squeeze(-1)
        if src_mask is not None:
            scores = scores.masked_fill(~src_mask, float("-inf"))
        alpha = torch.softmax(scores, dim=-1)
        return attention_context(alpha, encoder_outputs), alpha
    """,
    "ben": """
        proj_enc = self.Wh(encoder_outputs)
        proj_dec = self.Ws(decoder_state)[:, None, :]
        energy = self.v(torch.tanh(proj_enc + proj_dec))[..., 0]
        if src_mask is not None:
            energy = torch.where(src_mask, energy, torch.full_like(energy, float("-inf")))
        weights = torch.softmax(energy, dim=-1)
        return attention_context(weights, encoder_outputs), weights
    """,
    "cleo": """
        B, T, H = encoder_outputs.shape
        s = self.Ws(decoder_state).unsqueeze(1).expand(B, T, H)
        e = self.v(torch.tanh(self.Wh(encoder_outputs) + s)).view(B, T)
        mask = src_mask if src_mask is not None else torch.ones(B, T, dtype=torch.bool, device=e.device)
        e = e.masked_fill(mask == 0, -float("inf"))
        a = nn.functional.softmax(e, dim=1)
        ctx = attention_context(a, encoder_outputs)
        return ctx, a
    """,
    "dev": """
        hidden = torch.tanh(self.Wh(encoder_outputs) + self.Ws(decoder_state).unsqueeze(1))
        scores = torch.einsum("bth,h->bt", hidden, self.v.weight[0])
        if src_mask is not None:
            scores = scores.masked_fill(~src_mask, float("-inf"))
        alpha = torch.softmax(scores, dim=-1)
        return attention_context(alpha, encoder_outputs), alpha
    """,
    "eli": """
        w_s = self.Ws(decoder_state)
        w_h = self.Wh(encoder_outputs)
        summed = torch.tanh(w_h + w_s.unsqueeze(dim=1))
        logits = torch.matmul(summed, self.v.weight.t()).squeeze(2)
        if src_mask is not None:
            logits.masked_fill_(src_mask.logical_not(), float("-inf"))
        probs = logits.softmax(dim=-1)
        return attention_context(probs, encoder_outputs), probs
    """,
    "fay": """
        s_proj = self.Ws(decoder_state)
        columns = []
        for t in range(encoder_outputs.size(1)):
            columns.append(self.v(torch.tanh(self.Wh(encoder_outputs[:, t]) + s_proj)))
        scores = torch.cat(columns, dim=1)
        if src_mask is not None:
            scores[~src_mask] = float("-inf")
        alpha = torch.softmax(scores, dim=1)
        return attention_context(alpha, encoder_outputs), alpha
    """,
    "gus": """
        batch = encoder_outputs.size(0)
        feats = torch.tanh(self.Ws(decoder_state).unsqueeze(1) + self.Wh(encoder_outputs))
        v = self.v.weight.unsqueeze(0).expand(batch, -1, -1)  # (B, 1, H)
        scores = torch.bmm(feats, v.transpose(1, 2)).squeeze(-1)
        if src_mask is not None:
            scores = scores.masked_fill(~src_mask, float("-inf"))
        alpha = torch.softmax(scores, dim=-1)
        return attention_context(alpha, encoder_outputs), alpha
    """,
    "hana": """
        query = self.Ws(decoder_state).unsqueeze(-2)
        score = self.v(torch.tanh(query + self.Wh(encoder_outputs))).squeeze(-1)
        if src_mask is None:
            src_mask = torch.ones_like(score, dtype=torch.bool)
        score = score.masked_fill(~src_mask, float("-inf"))
        score = score - score.max(dim=-1, keepdim=True).values
        expd = score.exp()
        alpha = expd / expd.sum(dim=-1, keepdim=True)
        return attention_context(alpha, encoder_outputs), alpha
    """,
    "ivo": """
        energies = self.v(torch.tanh(self.Wh(encoder_outputs) + self.Ws(decoder_state)[:, None])).squeeze(2)
        if src_mask is not None:
            energies = energies.masked_fill(src_mask.eq(False), float("-inf"))
        alpha = torch.log_softmax(energies, dim=-1).exp()
        context = attention_context(alpha, encoder_outputs)
        return context, alpha
    """,
    "juno": """
        enc_part = self.Wh(encoder_outputs)  # B T H
        dec_part = self.Ws(decoder_state)  # B H
        e = self.v(torch.tanh(enc_part + dec_part.unsqueeze(1))).squeeze(-1)
        alpha = torch.softmax(e, dim=-1)
        if src_mask is not None:
            alpha = alpha * src_mask
            alpha = alpha / alpha.sum(dim=-1, keepdim=True)
        return attention_context(alpha, encoder_outputs), alpha
    """,
}
HONEST = sorted(ENCODER)
LEE = {"w_s": "dec_proj", "w_h": "enc_proj", "summed": "activated", "logits": "raw", "probs": "attn",
       "batch": "n", "x": "embeds", "h0": "init_h", "c0": "init_c", "outputs": "all_h", "h": "last_h",
       "c": "last_c"}


def honest(student: str) -> dict[str, str]:
    return {"encoder": solve("encoder", {"EncoderAll.forward": ENCODER[student]}),
            "context": solve("context", {"attention_context": CONTEXT[student]}),
            "additive": solve("additive", {"BahdanauAttention.forward": ADDITIVE[student]})}


def disguised(text: str) -> str:
    """`text` retyped: each name in LEE renamed, comments of his own, spaces after commas dropped."""
    out = []
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith(("return", "if ")) and "raise" not in line:
            out.append(line[: len(line) - len(line.lstrip())] + "# lee: here\n")
        out.append(re.sub(r"\b\w+\b", lambda m: LEE.get(m.group(0), m.group(0)), line).replace(", ", ","))
    return "".join(out)


def write_class(code):
    files = {s: honest(s) for s in HONEST}
    files["kim"] = dict(files["ana"])  # byte for byte
    files["lee"] = {**honest("ivo"), "additive": disguised(files["eli"]["additive"]),
                    "encoder": disguised(files["eli"]["encoder"])}
    # his own context, ben's line in other quotes and spacing: a one-liner two can well write alike
    files["lee"]["context"] = solve("context", {"attention_context":
                                                "return torch.einsum('bt,bth->bh',alpha,encoder_outputs)"})
    for student, pieces in files.items():
        (code / student).mkdir(parents=True)
        for module, text in pieces.items():
            (code / student / f"{module}.py").write_text(text)
    return files


PLANTED = [("ana", "kim"), ("eli", "lee")]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    where = tmp_path_factory.mktemp("similarity_class")
    files = write_class(where / "CODE")
    pairs = similarity.report(where / "CODE", where / "report.html").pairs
    every = similarity.report(where / "CODE", where / "all.html", threshold=0.0).pairs
    return files, pairs, every, (where / "report.html").read_text()


def test_the_class_is_what_it_says(graded):
    files, _, _, _ = graded
    assert set(TAKEN) <= set(MODULES)
    assert files["kim"] == files["ana"] and files["lee"]["additive"] != files["eli"]["additive"]
    assert [s for s in HONEST if CONTEXT[s] == CONTEXT["cleo"]] == ["cleo", "fay", "hana"]
    bare = {s: re.sub(r"\s*#.*", "", ENCODER[s]) for s in HONEST}  # juno's comments are his own
    assert [s for s in HONEST if bare[s] == bare["cleo"]] == ["cleo", "fay", "juno"]


def test_exactly_the_planted_pairs_are_flagged(graded):
    _, pairs, every, _ = graded
    assert sorted((p["a"], p["b"]) for p in pairs) == PLANTED, [(p["a"], p["b"], p["pieces"]) for p in pairs]
    honest_best = max(p["score"] for p in every if (p["a"], p["b"]) not in PLANTED)
    assert honest_best < min(p["score"] for p in pairs)


def test_a_byte_identical_copy_is_identical_in_every_piece_however_short(graded):
    _, pairs, _, page = graded
    kim = next(p for p in pairs if (p["a"], p["b"]) == ("ana", "kim"))
    assert kim["score"] == 1.0 and kim["pieces"] == {m: 1.0 for m in TAKEN}
    assert kim["identical"] == [m for m in MODULES if m in TAKEN]
    assert "identical" in page


def test_a_renamed_copy_scores_high_on_the_pieces_copied(graded):
    _, pairs, _, _ = graded
    lee = next(p for p in pairs if (p["a"], p["b"]) == ("eli", "lee"))
    assert lee["pieces"]["additive"] >= 0.8 and lee["identical"] == []
    # his find-and-replace also renamed words in the stub's docstring, which once hid the whole encoder
    assert lee["pieces"]["encoder"] >= 0.8


def test_the_dictated_lines_alone_flag_nobody(graded):
    _, _, every, _ = graded
    for p in every:
        if (p["a"], p["b"]) not in PLANTED:
            assert p["score"] < 0.5, p
            assert p.get("identical", []) == [], p  # the context's one-liner, three times, is the assignment's


def test_the_page_says_what_counts_as_common(graded):
    _, _, _, page = graded
    assert f"shared by more than {similarity.COMMON_SHARE:.0%} of the students" in page and "ignored" in page
    assert "context.py: 3 of the 12 who wrote it hand in the same short code" in page
    assert "<td class=hi>identical</td>" in page


def small(tmp_path, *students: str) -> list[dict]:
    files = write_class(tmp_path / "ALL")
    for s in students:
        (tmp_path / "CODE" / s).mkdir(parents=True)
        for module, text in files[s].items():
            (tmp_path / "CODE" / s / f"{module}.py").write_text(text)
    return similarity.report(tmp_path / "CODE", tmp_path / "r.html", threshold=0.0).pairs


def test_a_class_of_two_ignores_nothing_but_the_stubs(tmp_path):
    """With two students a shared run is shared by all of them: it counts, the dictated lines included."""
    [pair] = small(tmp_path, "ana", "dev")
    assert 0.5 <= pair["pieces"]["additive"] < 1.0 and pair["identical"] == []


def test_a_class_of_three_ignores_what_all_three_write(tmp_path):
    pairs = small(tmp_path, "ana", "dev", "gus")  # the mask, softmax and return lines, in each
    assert [p["score"] for p in pairs] == [0.0, 0.0, 0.0]
    pairs = small(tmp_path / "2", "eli", "ivo", "lee")
    assert [(p["a"], p["b"]) for p in pairs if p["score"] >= 0.5] == [("eli", "lee")]


def test_a_byte_identical_copy_in_a_class_of_two_is_identical(tmp_path):
    [pair] = small(tmp_path, "ana", "kim")
    assert pair["pieces"] == {m: 1.0 for m in TAKEN} and len(pair["identical"]) == len(TAKEN)


def test_long_code_that_many_hand_in_alike_is_one_group_but_a_short_one_is_common(tmp_path):
    """Four of six hand in ana's files: her additive scores are no obvious one-liner, so four alike is copying, shown
    as one group of four and not as six pairs; her encoder and context are short, and four alike is what the class
    writes."""
    files = write_class(tmp_path / "ALL")
    for s in ("ana", "kim", "ann", "kat", "dev", "gus"):
        (tmp_path / "CODE" / s).mkdir(parents=True)
        for module, text in files["ana" if s in ("kim", "ann", "kat") else s].items():
            (tmp_path / "CODE" / s / f"{module}.py").write_text(text)
    found = similarity.report(tmp_path / "CODE", tmp_path / "r.html")
    assert found.pairs == [] and found.sources == []
    assert found.groups == [{"piece": "additive", "students": ["ana", "ann", "kat", "kim"], "identical": True,
                             "score": 1.0}]
    every = similarity.report(tmp_path / "CODE", tmp_path / "all.html", threshold=0.0).pairs
    four = [p for p in every if {p["a"], p["b"]} <= {"ana", "kim", "ann", "kat"}]
    assert len(four) == 6 and all(p["grouped"] == ["additive"] for p in four)  # at 0, listed for the other pieces
    page = (tmp_path / "r.html").read_text()
    assert "<td>additive.py</td><td>4</td><td>identical</td><td>ana, ann, kat, kim</td>" in page
    assert "encoder.py: 4 of the 6 who wrote it hand in the same short code" in page
