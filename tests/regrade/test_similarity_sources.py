"""The similarity report with known sources (issue 41): who copied from whom when several hand in the same code.

A class of eight: ann, bea, cal, dan and eva paste the reference (two with its solution markers in plain sight,
three without them); carol and dave solve the pieces each their own way (the honest pair); ray hands in carol's
code with every name changed, his own comments and another layout. The reference is a known source, so the five
are one finding, "the reference's", and the page opens on ray and carol. An earlier term's class folder is a known
source the same way: two students who hand in last term's olga's code are hers, not a pair.
"""
from __future__ import annotations

import re

import pytest

from grader import REFERENCE
from grader.core.pieces import MODULES
from grader.regrade import similarity, similarity_input

from .test_similarity import BOB, CAROL, DAVE, as_alice, as_bob, stub

pytest.importorskip("copydetect")

PASTERS = ("ann", "bea", "cal", "dan", "eva")
RAY = {**BOB, "projected": "proj_keys", "hidden": "dec_h", "energy": "e_scores", "weights": "att", "raw": "logit",
       "probs": "p", "scale": "norm", "embedded": "vecs", "all_states": "outs", "final": "last", "memory": "enc",
       "carry": "hc", "token": "prev", "step_in": "inp", "new_h": "h1", "new_c": "c1", "ctx": "cv", "guess": "g",
       "target": "tg", "keep": "m", "hits": "ok", "result": "acc", "rows": "sel", "produced": "toks", "attn": "aw"}


def renamed(text: str) -> str:
    """carol's file retyped by ray: names changed, her comments dropped, his own added, another layout; the stub's
    lines as they were."""
    stubs = {line for m in MODULES for line in stub(m).splitlines(keepends=True)}
    out = []
    for line in text.splitlines(keepends=True):
        if line in stubs:
            out.append(line)
            continue
        code = re.sub(r"\s+#.*$", "", line.rstrip("\n"))
        code = re.sub(r"\b\w+\b", lambda m: RAY.get(m.group(0), m.group(0)), code)
        out.append(f"{code.replace(', ', ',')}  # ray\n" if code.strip() else "\n")
    return "".join(out)


def write(folder, files: dict[str, dict[str, str]]):
    for student, pieces in files.items():
        (folder / student).mkdir(parents=True)
        for module, text in pieces.items():
            (folder / student / f"{module}.py").write_text(text)
    return folder


def the_class() -> dict[str, dict[str, str]]:
    files = {s: {m: (REFERENCE / f"{m}.py").read_text() if s in ("ann", "bea") else as_alice(m) for m in MODULES}
             for s in PASTERS}
    return {**files, "carol": CAROL, "dave": DAVE, "ray": {m: renamed(t) for m, t in CAROL.items()}}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    where = tmp_path_factory.mktemp("sources")
    code = write(where / "CODE", the_class())
    found = similarity.report(code, where / "report.html", known=similarity_input.reference())
    return found, (where / "report.html").read_text()


def test_the_five_who_paste_the_reference_are_one_finding_per_piece_not_ten_pairs(graded):
    found, _ = graded
    additive = next(s for s in found.sources if s["piece"] == "additive")
    assert additive["source"] == "the reference" and sorted(additive["students"]) == list(PASTERS)
    assert sorted(additive["identical"]) == list(PASTERS)  # markers or none, the same code
    long_pieces = {s["piece"] for s in found.sources if sorted(s["identical"]) == list(PASTERS)}
    assert {"additive", "luong", "decoder", "evaluation"} <= long_pieces
    assert all(set(s["students"]) <= set(PASTERS) for s in found.sources)  # nobody honest matches the reference
    assert not any({p["a"], p["b"]} & set(PASTERS) for p in found.pairs)
    assert found.groups == []


def test_the_renamed_copy_between_two_students_comes_first_and_nothing_between_honest_students(graded):
    found, page = graded
    assert [(p["a"], p["b"]) for p in found.pairs] == [("carol", "ray")]
    assert found.pairs[0]["score"] >= 0.8 and found.pairs[0]["explained"] == {}
    copies = page.index("<h2>Copies between students</h2>")
    assert copies < page.index("<td>carol</td><td>ray</td>") < page.index("<h2>Matching a known source</h2>")
    assert "<td>additive.py</td><td>the reference</td><td>5</td>" in page


def test_without_known_sources_the_five_are_one_group_still_listed_after_the_copy(tmp_path):
    code = write(tmp_path / "CODE", the_class())
    found = similarity.report(code, tmp_path / "r.html")
    assert found.pairs[0]["a"] == "carol" and found.pairs[0]["b"] == "ray"
    assert {tuple(g["students"]) for g in found.groups if g["piece"] == "additive"} == {PASTERS}


def test_the_reference_retyped_with_other_names_matches_it_though_five_paste_it_whole(tmp_path):
    code = write(tmp_path / "CODE", {**the_class(), "bob": {m: as_bob(m) for m in MODULES}})
    found = similarity.report(code, tmp_path / "r.html", known=similarity_input.reference())
    additive = next(s for s in found.sources if s["piece"] == "additive")
    assert sorted(additive["students"]) == sorted((*PASTERS, "bob")) and "bob" not in additive["identical"]
    assert additive["students"]["bob"] >= 0.8  # the five's lines are not taken for the assignment's
    assert [(p["a"], p["b"]) for p in found.pairs] == [("carol", "ray")]


def test_an_earlier_terms_class_folder_is_a_known_source_too(tmp_path):
    last = write(tmp_path / "2025-fall", {"olga": DAVE, "pete": {m: as_alice(m) for m in MODULES}})
    now = the_class()
    now.update({"uma": dict(DAVE), "vic": {m: renamed(t) for m, t in DAVE.items()}})
    code = write(tmp_path / "CODE", now)
    known = similarity_input.known([last])[0]
    found = similarity.report(code, tmp_path / "r.html", known=known)
    olga = next(s for s in found.sources if s["piece"] == "additive" and s["source"] == "2025-fall/olga")
    assert sorted(olga["students"]) == ["dave", "uma", "vic"]  # dave's own code was last term's olga's
    assert olga["identical"] == ["dave", "uma"] and olga["students"]["vic"] >= 0.5
    assert not any({p["a"], p["b"]} <= {"dave", "uma", "vic"} for p in found.pairs)
    assert [(p["a"], p["b"]) for p in found.pairs] == [("carol", "ray")]
    # the reference and pete's copy of it are identical sources: the five are listed under the first given
    assert {s["source"] for s in found.sources if set(s["students"]) == set(PASTERS)} == {"the reference"}


def test_a_known_source_is_read_as_hostile_as_the_class(tmp_path):
    last = tmp_path / "last"
    (last / "olga").mkdir(parents=True)
    (last / "olga" / "additive.py").symlink_to(REFERENCE / "additive.py")
    (last / "olga" / "luong.py").write_text("x" * (similarity_input.MAX_BYTES + 1))
    sources, notes = similarity_input.known([last])
    assert sources == {**similarity_input.reference(), "last/olga": {}}
    assert "last/olga/additive.py: skipped (a link)" in notes and any(n.startswith("last/olga/luong.py") for n in notes)


def test_the_class_reports_beside_a_gradebook_take_the_reference_and_the_known_folders(tmp_path):
    from grader.regrade import book

    files = book.Files.of(tmp_path / "grades.csv")
    write(files.code, {"ann": {m: as_alice(m) for m in MODULES}, "uma": dict(DAVE), "carol": CAROL})
    last = write(tmp_path / "2025-fall", {"olga": DAVE})
    rows = [{"student": s, "total": 0, "max_score": 73, "status": "ok"} for s in ("ann", "carol", "uma")]
    said = book.class_reports(files, rows, progress=False, known=[last])
    assert "similarity:" in said
    page = files.similarity.read_text()
    assert "<td>additive.py</td><td>the reference</td><td>1</td><td>ann (identical)</td>" in page
    assert "<td>additive.py</td><td>2025-fall/olga</td><td>1</td><td>uma (identical)</td>" in page
    assert "1 student(s) hand in the reference&#x27;s additive.py: ann" in files.classreport.read_text()


@pytest.mark.parametrize("verb", [["batch", "merge", "part.csv"], ["batch", "class", "sub"]])
def test_a_known_folder_that_is_not_there_is_refused_before_anything_runs(tmp_path, verb):
    from click.testing import CliRunner

    from grader.cli import cli

    result = CliRunner().invoke(cli, [*verb, "--known", str(tmp_path / "nowhere"), "--out", str(tmp_path / "g.csv")])
    assert result.exit_code == 2 and "--known" in result.output and "does not exist" in result.output
    assert not (tmp_path / "g.csv").exists()
