"""The similarity report on a small class written from the lab's own code.

alice solves every piece as the reference does; bob hands in alice's code with its variables renamed, its
comments swapped and its layout changed; carol and dave solve pieces their own way (dave hands in three);
erin and frank hand in the untouched stubs.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader import EXERCISES, REFERENCE, ROOT
from grader.core.pieces import MODULES
from grader.regrade import similarity

pytest.importorskip("copydetect")

BOB = {"keys": "projected_keys", "query": "q", "scores": "energies", "cached": "memo", "alpha": "attn_w",
       "d": "dim", "e": "emb", "h_prev": "hidden_before", "c_prev": "cell_before", "context": "ctx",
       "logits": "out", "enc_outputs": "memory", "state": "st", "y_prev": "token", "all_logits": "outs",
       "all_alpha": "weights_all", "tokens": "preds", "alphas": "attn_ws", "pred": "decoded", "gold": "want",
       "real": "is_real", "correct": "n_right", "total": "n_all", "lengths": "src_lens", "h": "hid", "c": "cel"}
SCRIPT = "</pre></code><script>alert(document.cookie)</script>"


def stub(module: str) -> str:
    return (EXERCISES / f"{module}.py").read_text()


def solve(module: str, answers: dict[str, str], imports: str = "") -> str:
    """The stub with each `write <owner>` raise replaced by answers[owner] and `imports` after `import torch`."""
    out = []
    for line in stub(module).splitlines(keepends=True):
        raised = re.match(r"(\s*)raise NotImplementedError\(\"piece '\w+': write ([\w.]+)\"\)", line)
        if raised:
            out.append(textwrap.indent(textwrap.dedent(answers[raised.group(2)]).strip("\n") + "\n",
                                       raised.group(1)))
        else:
            out.append(line + imports if line == "import torch\n" else line)
    return "".join(out)


def as_alice(module: str) -> str:
    """The reference without its solution markers: a student who solved it the reference's way."""
    lines = (REFERENCE / f"{module}.py").read_text().splitlines(keepends=True)
    return stub(module).splitlines(keepends=True)[0] + "".join(x for x in lines if "### " not in x)


def as_bob(module: str) -> str:
    """alice's answer retyped: other variable names, his own comments, another layout."""
    out, inside = [], False
    for line in (REFERENCE / f"{module}.py").read_text().splitlines(keepends=True):
        if "### BEGIN SOLUTION" in line or "### END SOLUTION" in line:
            inside = "BEGIN" in line
            continue
        if inside:
            code = re.sub(r"\s+#.*$", "", line.rstrip("\n"))  # his comments, not alice's
            if code.strip().startswith("#"):
                continue
            code = re.sub(r"\b\w+\b", lambda m: BOB.get(m.group(0), m.group(0)), code)
            code = code.replace(", ", ",").replace(" = ", "=").replace('"', "'")
            indent = code[: len(code) - len(code.lstrip())]
            out.append(f"{indent}# bob: next step\n{code}  # ok\n")
        else:
            out.append(line)
    return stub(module).splitlines(keepends=True)[0] + "".join(out)


CAROL = {
    "encoder": solve("encoder", {"EncoderAll.forward": """
        embedded = self.embed(src)
        all_states, final = self.rnn(embedded)
        return all_states, final
    """}),
    "context": solve("context", {"attention_context": """
        return torch.einsum("bt,bth->bh", alpha, encoder_outputs)
    """}),
    "additive": solve("additive", {"BahdanauAttention.forward": """
        projected = self.Wh(encoder_outputs)
        hidden = self.Ws(decoder_state)[:, None, :]
        energy = self.v(torch.tanh(projected + hidden))[..., 0]
        if src_mask is not None:
            energy = energy.masked_fill(src_mask == 0, -1e9)
        weights = energy.softmax(-1)
        return attention_context(weights, encoder_outputs), weights
    """}),
    "luong": solve("luong", {"LuongDotAttention.forward": """
        scale = math.sqrt(encoder_outputs.shape[2])
        raw = torch.matmul(encoder_outputs, decoder_state[:, :, None])[:, :, 0] / scale
        if src_mask is not None:
            raw[~src_mask] = -float("inf")
        probs = torch.softmax(raw, dim=1)
        return attention_context(probs, encoder_outputs), probs
    """}, imports="import math\n"),
    "decoder": solve("decoder", {"AttnDecoder.forward_step": """
        ctx, weights = self.attn(encoder_outputs, state[0], src_mask)
        step_in = torch.cat((self.embed(y_prev[:, 0]), ctx), 1)
        new_h, new_c = self.rnn(step_in, state)
        return self.head(torch.cat((new_h, ctx), 1)), (new_h, new_c), weights
    """, "Seq2SeqAttn.forward": """
        memory, final = self.encoder(src)
        carry = tuple(x[0] for x in final)
        token = tgt[:, 0:1]
        logits_seq = []
        alpha_seq = []
        for step in range(tgt.shape[1] - 1):
            step_logits, carry, step_alpha = self.decoder.forward_step(token, carry, memory, src_mask)
            logits_seq += [step_logits[:, None]]
            alpha_seq += [step_alpha[:, None]]
            truth = teacher_forcing_ratio >= 1.0 or random.random() < teacher_forcing_ratio
            token = tgt[:, step + 1 : step + 2] if truth else step_logits.argmax(dim=1, keepdim=True)
        return torch.cat(logits_seq, 1), torch.cat(alpha_seq, 1)
    """}, imports="import random\n"),
    "evaluation": solve("evaluation", {"greedy_decode": """
        memory, (h, c) = model.encoder(src)
        carry = (h[0], c[0])
        current = sos
        produced = torch.zeros(src.size(0), steps, dtype=torch.long)
        attn = []
        for i in range(steps):
            scores, carry, a = model.decoder.forward_step(current, carry, memory, src_mask)
            current = scores.argmax(dim=-1).unsqueeze(-1)
            produced[:, i] = current[:, 0]
            attn += [a]
        return produced, torch.stack(attn, 1)
    """, "accuracy_by_length": """
        guess, _ = greedy_decode(model, src, src_mask, tgt[:, 0:1], tgt.shape[1] - 1)
        target = tgt[:, 1:]
        keep = target.ne(0)
        hits = guess.eq(target) & keep
        src_len = src_mask.long().sum(dim=1)
        result = {}
        for length in sorted(set(src_len.tolist())):
            rows = src_len == length
            result[int(length)] = float(hits[rows].sum()) / float(keep[rows].sum())
        return result
    """}),
}
DAVE = {  # no decoder or evaluation
    "encoder": solve("encoder", {"EncoderAll.forward": """
        x = self.embed(src)
        out, (hn, cn) = self.rnn(x)
        return out, (hn, cn)
    """}),  # alice's three lines, as nearly anyone writes them
    "context": solve("context", {"attention_context": """
        weighted = alpha.unsqueeze(-1) * encoder_outputs  # broadcast over H
        return weighted.sum(dim=1)
    """}),
    "additive": solve("additive", {"BahdanauAttention.forward": """
        B, T, H = encoder_outputs.shape
        expanded = decoder_state.unsqueeze(1).expand(B, T, H)
        e = self.v(torch.tanh(self.Wh(encoder_outputs) + self.Ws(expanded))).squeeze(2)
        keep = src_mask if src_mask is not None else torch.ones_like(e, dtype=torch.bool)
        e = torch.where(keep, e, torch.full_like(e, float("-inf")))
        a = torch.nn.functional.softmax(e, dim=1)
        return attention_context(a, encoder_outputs), a
    """}),
    "luong": solve("luong", {"LuongDotAttention.forward": """
        dots = (encoder_outputs * decoder_state.unsqueeze(1)).sum(-1) * encoder_outputs.size(-1) ** -0.5
        if src_mask is not None:
            dots = torch.where(src_mask, dots, torch.tensor(float("-inf"), device=dots.device))
        w = dots.softmax(dim=-1)
        return attention_context(w, encoder_outputs), w
    """}),
}


def write_class(code: Path) -> Path:
    files = {"alice": {m: as_alice(m) for m in MODULES}, "bob": {m: as_bob(m) for m in MODULES},
             "carol": CAROL, "dave": DAVE, "erin": {m: stub(m) for m in MODULES},
             "frank": {m: stub(m) for m in MODULES}}
    files["bob"]["additive"] += f"\n# {SCRIPT}\nNOTE = '{SCRIPT}'\n"  # in a piece the page shows
    for student, pieces in files.items():
        (code / student).mkdir(parents=True)
        for module, text in pieces.items():
            (code / student / f"{module}.py").write_text(text)
    return code


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    where = tmp_path_factory.mktemp("similarity")
    code = write_class(where / "CODE")
    pairs = similarity.report(code, where / "report.html").pairs
    every = similarity.report(code, where / "all.html", threshold=0.0).pairs
    return code, where, pairs, every, (where / "report.html").read_text()


def score(every: list[dict], a: str, b: str) -> dict:
    return next(p for p in every if (p["a"], p["b"]) == tuple(sorted((a, b))))


def test_a_copy_with_renamed_variables_is_the_top_pair(graded):
    _, _, pairs, _, page = graded
    assert pairs and (pairs[0]["a"], pairs[0]["b"]) == ("alice", "bob")
    assert pairs[0]["score"] >= 0.5 and pairs[0]["score"] == max(pairs[0]["pieces"].values())
    assert sum(s >= 0.5 for s in pairs[0]["pieces"].values()) >= 4  # every piece longer than a line or two
    table = page.index("<table")  # the flagged pairs' table, highest first, before any code
    assert table < page.index("<td>alice</td><td>bob</td>") < page.index("<pre>")


def test_only_the_copy_is_flagged(graded):
    _, _, pairs, every, _ = graded
    assert [(p["a"], p["b"]) for p in pairs] == [("alice", "bob")]
    assert [p["score"] for p in every] == sorted((p["score"] for p in every), reverse=True)
    assert all(p["a"] < p["b"] and 0.0 <= p["score"] <= 1.0 for p in every)


def test_untouched_stubs_match_nobody(graded):
    _, _, _, every, _ = graded
    for p in every:
        if {"erin", "frank"} & {p["a"], p["b"]}:
            assert p["score"] == 0.0, p


def test_honestly_different_solutions_stay_below_the_threshold(graded):
    _, _, _, every, _ = graded
    for a, b in [("alice", "carol"), ("alice", "dave"), ("carol", "dave"), ("bob", "carol"), ("bob", "dave")]:
        assert score(every, a, b)["score"] < 0.5, score(every, a, b)


def test_the_encoders_obvious_three_lines_flag_nobody(graded):
    _, _, _, every, _ = graded
    assert score(every, "alice", "dave")["pieces"]["encoder"] == 0.0  # the same, but too short to tell


def test_a_missing_file_leaves_the_piece_out_of_the_pair(graded):
    _, _, _, every, _ = graded
    assert set(score(every, "alice", "dave")["pieces"]) == {"encoder", "additive", "context", "luong"}
    assert set(score(every, "alice", "carol")["pieces"]) == set(MODULES)


def test_a_script_in_a_students_file_reaches_the_page_escaped(graded):
    _, _, _, _, page = graded
    assert "&lt;script&gt;alert(document.cookie)&lt;/script&gt;" in page  # bob's additive is shown
    assert "<script" not in page and "</pre></code><script" not in page
    assert "Content-Security-Policy" in page and "http" not in page.replace("http-equiv", "")  # nothing fetched


def test_the_same_class_gives_the_same_page_under_any_hash_seed(graded):
    code, where, pairs, _, page = graded
    run = ("import sys; from pathlib import Path; from grader.regrade.similarity import report; "
           "print(report(Path(sys.argv[1]), Path(sys.argv[2])).pairs)")
    for seed in ("1", "2"):
        out = where / f"seed{seed}.html"
        done = subprocess.run([sys.executable, "-c", run, str(code), str(out)], capture_output=True, text=True,
                              cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": seed}, check=True)
        assert out.read_text() == page and str(where) not in page  # no temporary path either
        assert done.stdout.strip() == repr(pairs)
        assert done.stderr == ""  # no progress bar, no browser


def test_links_large_files_and_odd_entries_are_skipped_with_a_note(tmp_path):
    code = write_class(tmp_path / "CODE")
    (code / "grace").mkdir()
    for m in MODULES:  # each a link to alice's file: followed, grace would be her perfect copy
        (code / "grace" / f"{m}.py").symlink_to(code / "alice" / f"{m}.py")
    (code / "heidi").symlink_to(code / "alice", target_is_directory=True)
    (code / "ivan").mkdir()
    (code / "ivan" / "luong.py").write_text(as_alice("luong") + "#" * similarity.MAX_BYTES)
    os.mkfifo(code / "ivan" / "context.py")
    (code / "notes.txt").write_text("not a student")
    pairs = similarity.report(code, tmp_path / "report.html").pairs
    page = (tmp_path / "report.html").read_text()
    assert [(p["a"], p["b"]) for p in pairs] == [("alice", "bob")]
    for note in ("grace/additive.py: skipped (a link)", "heidi: skipped", "ivan/luong.py: skipped",
                 "ivan/context.py: skipped (not a plain file)", "notes.txt: skipped"):
        assert note in page


def test_the_stubs_can_come_from_a_folder(graded, tmp_path):
    code, _, pairs, _, _ = graded
    shutil.copytree(EXERCISES, tmp_path / "stubs")
    assert similarity.report(code, tmp_path / "r.html", stubs=tmp_path / "stubs").pairs == pairs


def test_without_copydetect_the_error_says_what_to_install(monkeypatch, tmp_path):
    for name in [m for m in sys.modules if m == "copydetect" or m.startswith("copydetect.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "copydetect", None)
    with pytest.raises(ImportError, match=re.escape('pip install -e ".[regrade]"')):
        similarity.report(tmp_path, tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_a_large_class_compared_in_processes_side_by_side_gets_the_same_page(graded, tmp_path, monkeypatch):
    code, _, pairs, _, page = graded
    monkeypatch.setattr(similarity, "PARALLEL_FROM", 2)  # this small class takes the large class's path
    again = similarity.report(code, tmp_path / "parallel.html").pairs
    assert again == pairs and (tmp_path / "parallel.html").read_text() == page
