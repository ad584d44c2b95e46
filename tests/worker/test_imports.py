"""What a piece's worker is given to import: the lab's own modules the registry names for the piece
(grader/core/pieces.py `Piece.lab`, read by grader/judge/sources.py `lab_sources`), and the reference's modules its
file imports (`student_sources`). No worker runs here: these are the lists the judge sends."""
from __future__ import annotations

import ast
import json

import pytest

from grader import ROOT
from grader.judge.sources import lab_sources, relative_imports, student_sources
from grader.core.pieces import PIECES
from grader.judge.stub_source import stub_source
from grader.judge.reference_code import ORDER

from helpers import REFERENCE, make_submission

GRADER = ROOT / "grader"
LAB = GRADER / "lab"
MANIFEST = json.loads((GRADER / "cases" / "manifest.json").read_text())


def top_level_relative_imports(source: str) -> set[str]:
    """The lab modules a module imports when it is loaded (imports inside functions run only when called);
    `from . import ROOT` takes a name from grader/__init__.py, which every worker has, not a lab module."""
    found = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
            found |= {n for n in names if (LAB / f"{n}.py").is_file() or (LAB / n).is_dir()}
    return found


def top_level_names(source: str) -> set[str]:
    return {n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def holders(name: str) -> set[str]:
    """The pieces whose worker is given a lab module that defines `name` at its top level."""
    return {p.name for p in PIECES.values() for _, text in lab_sources(p.lab) if name in top_level_names(text)}


# ---- the lab's own modules -----------------------------------------------------------------------------

def test_each_piece_is_given_the_lab_modules_its_registry_entry_names_read_from_grader():
    for piece in PIECES.values():
        got = lab_sources(piece.lab)
        assert [name for name, _ in got] == list(piece.lab)
        for name, text in got:
            assert text == (LAB / f"{name}.py").read_text(encoding="utf-8")


def test_only_the_pieces_with_a_training_case_are_given_lab_modules():
    training = {piece for piece, cases in MANIFEST.items() if any(c["slow"] for c in cases)}
    assert training == {"luong", "decoder"}
    assert {p.name for p in PIECES.values() if p.lab} == training


def test_each_lab_module_imports_only_lab_modules_given_before_it():
    for piece in PIECES.values():
        for i, (name, text) in enumerate(lab_sources(piece.lab)):
            needs = top_level_relative_imports(text)
            assert needs <= set(piece.lab[:i]), f"{piece.name}: grader/lab/{name}.py imports {needs - set(piece.lab[:i])}"


def test_no_worker_is_given_the_evaluator_that_computes_the_evaluation_pieces_answer():
    assert not any("evaluate" in p.lab for p in PIECES.values())
    assert holders("accuracy_by_length") == set()
    assert "evaluate" in relative_imports((LAB / "train.py").read_text())  # train() imports it when called ...
    assert "evaluate" not in top_level_relative_imports((LAB / "train.py").read_text())  # ... never on import


def test_only_luongs_worker_holds_the_baselines_encoder_and_teacher_forced_decode():
    # the baseline's Encoder is an LSTM encoder over every position, and decode_teacher_forced is the decoder's
    # forward: Luong's training case runs them around the student's attention, and no other worker gets them
    assert holders("Encoder") == {"luong"}
    assert holders("decode_teacher_forced") == {"luong"}
    assert holders("LuongDecoder") == {"luong"}
    assert PIECES["decoder"].lab == ("toy", "train")  # the decoder trains its own code: the toy data and the loop only


# ---- the reference's modules beside the student's file -----------------------------------------------

WORKER_MODULES = {  # what each piece's worker loads, the student's file last: the reference of what it imports
    "encoder": ["encoder"],
    "context": ["context"],
    "additive": ["context", "additive"],
    "luong": ["context", "luong"],
    "decoder": ["encoder", "context", "additive", "decoder"],
    "evaluation": ["encoder", "context", "additive", "decoder", "evaluation"],
}


@pytest.mark.parametrize("piece", list(PIECES))
def test_a_pieces_worker_is_given_the_reference_of_what_its_file_imports_and_its_own_file_last(piece, tmp_path):
    stem = PIECES[piece].module
    sub = make_submission(tmp_path / "sub", files={stem: (REFERENCE / f"{stem}.py").read_text() + "\n# mine\n"})
    got = student_sources(sub, REFERENCE, stem, ORDER, stubbed=piece == "evaluation")
    assert [name for name, _ in got] == WORKER_MODULES[piece]
    assert got[-1] == (stem, (sub / f"{stem}.py").read_text())
    for name, text in got[:-1]:
        ref = (REFERENCE / f"{name}.py").read_text()
        assert text == (stub_source(ref, name) if piece == "evaluation" else ref)


def test_the_evaluation_worker_holds_no_solution_of_the_modules_before_it(tmp_path):
    sub = make_submission(tmp_path / "sub")
    got = dict(student_sources(sub, REFERENCE, "evaluation", ORDER, stubbed=True))
    for name in ("encoder", "context", "additive", "decoder"):
        assert "BEGIN SOLUTION" not in got[name] and "raise NotImplementedError" in got[name]
    solution = (REFERENCE / "decoder.py").read_text().split("### BEGIN SOLUTION", 1)[1].split("### END SOLUTION")[0]
    assert not [ln for ln in solution.splitlines() if len(ln.strip()) > 20 and ln.strip() in got["decoder"]]


@pytest.mark.parametrize("stem, imports, given", [
    pytest.param("encoder", ["from .decoder import Seq2SeqAttn", "from .evaluation import greedy_decode"],
                 ["encoder"], id="the encoder importing the decoder and the evaluation"),
    pytest.param("context", ["from .additive import BahdanauAttention", "from .luong import LuongDotAttention"],
                 ["context"], id="the context importing both attentions"),
    pytest.param("additive", ["from .luong import LuongDotAttention", "from .decoder import AttnDecoder"],
                 ["context", "additive"], id="the additive attention importing later pieces"),
])
def test_a_file_that_imports_a_later_piece_is_given_nothing_of_it(stem, imports, given, tmp_path):
    text = "\n".join(imports) + "\n" + (REFERENCE / f"{stem}.py").read_text()
    sub = make_submission(tmp_path / "sub", files={stem: text})
    got = student_sources(sub, REFERENCE, stem, ORDER)
    assert [name for name, _ in got] == given


def test_the_decoders_worker_never_holds_luong_even_when_its_file_imports_it(tmp_path):
    """The registry's imports decide, not the student's file: an undeclared `from .luong import` finds nothing."""
    plain = make_submission(tmp_path / "plain")
    asks = make_submission(tmp_path / "asks", edits={"decoder": [("from .encoder import EncoderAll\n",
                                                                   "from .encoder import EncoderAll\nfrom .luong import LuongDotAttention\n")]})
    assert "luong" not in dict(student_sources(plain, REFERENCE, "decoder", ORDER))
    assert [n for n, _ in student_sources(asks, REFERENCE, "decoder", ORDER)] == ["encoder", "context", "additive",
                                                                                  "decoder"]


def test_a_pieces_worker_holds_what_its_registry_entry_imports_even_when_its_file_imports_none_of_it(tmp_path):
    sub = make_submission(tmp_path / "sub", files={"decoder": "class AttnDecoder:\n    pass\n"})
    assert [n for n, _ in student_sources(sub, REFERENCE, "decoder", ORDER)] == ["encoder", "context", "additive",
                                                                                 "decoder"]


def test_without_a_reference_a_worker_is_given_the_students_own_earlier_files(tmp_path):
    sub = make_submission(tmp_path / "sub", files={"context": "def attention_context(alpha, e):\n    return 'mine'\n"})
    got = student_sources(sub, None, "additive", ORDER)
    assert got == [("context", (sub / "context.py").read_text()), ("additive", (sub / "additive.py").read_text())]


def test_a_linked_file_is_never_read(tmp_path):
    sub = make_submission(tmp_path / "sub")
    (sub / "context.py").unlink()
    (sub / "context.py").symlink_to(REFERENCE / "context.py")
    assert student_sources(sub, REFERENCE, "context", ORDER) == [("context", "")]
    assert student_sources(sub, None, "additive", ORDER) == [("additive", (sub / "additive.py").read_text())]


# ---- the registry's imports -------------------------------------------------------------------------

def test_the_registrys_imports_are_the_modules_the_judge_finds_in_each_reference_module():
    for piece in PIECES.values():
        named = {line.split()[1].removeprefix(".") for line in piece.imports}  # "from .context import ..."
        found = relative_imports((REFERENCE / f"{piece.module}.py").read_text())
        assert named == found, f"grader/core/pieces.py: {piece.name} imports {sorted(found)}, the registry says {sorted(named)}"
        assert all(line.startswith("from .") for line in piece.imports)


def test_a_piece_imports_only_pieces_before_it_so_its_worker_can_be_given_them():
    for piece in PIECES.values():
        for line in piece.imports:
            other = line.split()[1].removeprefix(".")
            assert ORDER.index(other) < ORDER.index(piece.module), f"{piece.name} imports {other}, which comes after it"

