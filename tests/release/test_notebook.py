"""The lesson notebook: generated from the stubs without drift, extracted to gradable files, runnable in Jupyter."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from grader.lesson import ipynb, kernel, notebook
from grader.lesson.ipynb import NotebookError
from grader.lesson.notebook import NOTEBOOK
from grader.core.pieces import PIECES

from helpers import QUICK, grade_dict, scores

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

nbformat = pytest.importorskip("nbformat")


def write_nb(path: Path, nb) -> Path:
    path.write_text(notebook.dumps(nb), encoding="utf-8")
    return path


def tagged(nb, piece: str) -> list:
    return [c for c in nb.cells if f"piece:{piece}" in c.metadata.get("tags", [])]


def test_the_committed_notebook_is_what_the_stubs_generate():
    assert NOTEBOOK.read_text(encoding="utf-8") == notebook.dumps(notebook.build("stubs")), \
        "exercises/lesson.ipynb drifted from the stubs: run `grade stubs`"


def test_building_twice_gives_byte_identical_json_without_outputs():
    text = notebook.dumps(notebook.build("stubs"))
    assert text == notebook.dumps(notebook.build("stubs"))
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    assert all(c.outputs == [] and c.execution_count is None for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("source", ["stubs", "reference"])
def test_every_piece_has_exactly_one_tagged_cell_starting_with_its_marker(source):
    nb = notebook.build(source)
    for piece in PIECES:
        cells = tagged(nb, piece)
        assert len(cells) == 1, piece
        code = cells[0].source
        assert code.splitlines()[0] == f"# piece: {piece}"
        assert "from __future__" not in code and "from ." not in code
        assert ("NotImplementedError" in code) == (source == "stubs")
        assert "SOLUTION" not in code


def test_the_reference_notebook_extracted_scores_full_marks_on_every_piece(tmp_path):
    sub = notebook.extract(write_nb(tmp_path / "lesson.ipynb", notebook.build("reference")), tmp_path / "sub")
    assert sorted(p.stem for p in sub.glob("*.py")) == sorted(p.module for p in PIECES.values())
    report = grade_dict(sub, list(PIECES), QUICK)
    assert report["score"] == report["max_score"] > 0, scores(report)


def test_the_stub_notebook_extracted_scores_zero_saying_not_implemented_yet(tmp_path):
    sub = notebook.extract(NOTEBOOK, tmp_path / "sub")
    report = grade_dict(sub, list(PIECES), QUICK)
    for piece in report["pieces"]:
        assert piece["score"] == 0, piece["name"]
        assert any(f"not implemented yet (piece '{piece['name']}'" in c["message"] for c in piece["cases"]), piece


def test_extracted_modules_get_the_fixed_header_and_the_references_relative_imports(tmp_path):
    sub = notebook.extract(write_nb(tmp_path / "lesson.ipynb", notebook.build("reference")), tmp_path / "sub")
    text = (sub / "decoder.py").read_text()
    assert text.startswith(ipynb.FIXED_HEADER)
    assert "from .additive import BahdanauAttention\nfrom .encoder import EncoderAll\n" in text
    assert "from ." not in (sub / "encoder.py").read_text()
    compile(text, "decoder.py", "exec")


def test_notebook_only_lines_are_commented_out_of_the_extracted_module():
    text = ipynb.module_text("context", "# piece: context\n%time x = 1\n!ls\ndef f():\n    return 1\ncheck('context')\n")
    compile(text, "context.py", "exec")
    assert "# %time x = 1" in text and "\ndef f():\n    return 1\n" in text


def test_a_piece_whose_cell_is_missing_is_simply_not_written(tmp_path):
    nb = notebook.build("reference")
    drop = tagged(nb, "decoder")[0]
    nb.cells = [c for c in nb.cells if c is not drop]
    sub = notebook.extract(write_nb(tmp_path / "lesson.ipynb", nb), tmp_path / "sub")
    assert not (sub / "decoder.py").exists() and (sub / "additive.py").exists()


def test_a_cell_that_lost_its_tag_is_still_found_by_its_marker_line():
    nb = notebook.build("reference")
    tagged(nb, "luong")[0].metadata = {}
    assert ipynb.piece_cells(nb)["luong"].startswith("# piece: luong\n")


@pytest.mark.parametrize("text, reason", [
    ('{"cells": [', "not JSON"),
    ("[1, 2, 3]", "no 'nbformat' version or 'cells' list"),
    ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": 7, "metadata": {}}]}', "cell 1 has no cell_type"),
])
def test_a_broken_notebook_raises_a_one_line_notebook_error(tmp_path, text, reason):
    path = tmp_path / "broken.ipynb"
    path.write_text(text)
    with pytest.raises(NotebookError) as info:
        notebook.extract(path, tmp_path / "sub")
    message = str(info.value)
    assert "\n" not in message and message.startswith("broken.ipynb is not a valid notebook: ") and reason in message
    assert not (tmp_path / "sub").exists()


def test_a_notebook_without_piece_cells_raises_a_notebook_error(tmp_path):
    nb = notebook.build("stubs")
    nb.cells = [c for c in nb.cells if c.cell_type == "markdown"]
    with pytest.raises(NotebookError, match="has no piece cells"):
        notebook.extract(write_nb(tmp_path / "lesson.ipynb", nb), tmp_path / "sub")


def test_check_outside_ipython_grades_the_cell_from_the_notebook_file(tmp_path, capsys):
    path = write_nb(tmp_path / "lesson.ipynb", notebook.build("reference"))
    runs = kernel.check("context", notebook=path)
    assert [r.name for r in runs] == ["context"] and "context" in repr(runs)
    out = capsys.readouterr().out
    assert out.startswith("Attention lab: grading <notebook cell>")
    got, top = out.rsplit("Total: ", 1)[1].split("/")
    assert int(got) == int(top) > 0
    with pytest.raises(NotebookError, match="there is no piece 'attention'"):
        kernel.check("attention")
    with pytest.raises(NotebookError, match="no cell containing the line '# piece: luong' has been run yet"):
        kernel.check("luong")


def test_the_reference_notebook_runs_top_to_bottom_in_a_kernel(tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("ATTNLAB_NOTEBOOK_STEPS", "60")  # enough to run every cell; the kernel inherits the environment
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = notebook.build("reference")
    start = time.perf_counter()
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    seconds = time.perf_counter() - start
    print(f"notebook executed in {seconds:.1f} s")
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    images = [c.id for c in code for o in c.outputs if "image/png" in o.get("data", {})]
    # the length curve and the heat map of section 9; both models' curves and their heat maps side by side in 11
    assert len(images) == 4, images
    compared = "".join(o.get("text", "") for c in code if "Seq2SeqLuong" in c.source or "heatmaps(" in c.source
                       for o in c.outputs)
    assert "Bahdanau:" in compared and "Luong:" in compared and "ms per training step" in compared
    printed = "".join(o.get("text", "") for o in code[-1].outputs)
    got, top = printed.rsplit("Total: ", 1)[1].split()[0].split("/")
    assert int(got) == int(top) > 0, printed  # check() found the additive cell in the kernel's history
    assert json.loads(nbformat.writes(nb))  # outputs serialise: a student can save the run notebook
    assert not list(tmp_path.iterdir()), "the notebook wrote files beside itself (in exercises/, for git to pick up)"


def test_check_takes_the_most_recently_run_cell_marked_for_the_piece(monkeypatch):
    IPython = pytest.importorskip("IPython")
    history = ["", "# piece: context\nold = 1", "# piece: additive\nx = 1", "# piece: context\nnew = 2", 'check("context")']
    shell = type("Shell", (), {"user_ns": {"In": history}})()
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    assert kernel._from_history("context") == "# piece: context\nnew = 2"
    assert kernel._from_history("luong") is None


# --- what a student release needs: nothing from reference/ ---------------------------------------

def test_the_registry_holds_each_reference_modules_relative_imports():
    for piece in PIECES.values():
        text = (notebook.REFERENCE / f"{piece.module}.py").read_text()
        found = tuple(ln for ln in text.splitlines() if ln.startswith("from ."))
        assert piece.imports == found, f"grader/core/piece_facts.json is stale for {piece.name}: run `grade stubs`"


def test_the_registry_recognises_each_generated_stub_by_its_digest():
    from grader.lesson.stubs import expected

    for piece in PIECES.values():
        stub = expected()[notebook.EXERCISES / f"{piece.module}.py"]
        assert piece.stub_digest == notebook.digest(stub), \
            f"grader/core/piece_facts.json is stale: the stub of {piece.name} changed; run `grade stubs`"
        assert notebook.digest(stub.replace("\n", "\r\n") + "\n\n") == piece.stub_digest  # CRLF, blank lines


def test_extracting_and_checking_a_notebook_never_read_reference(tmp_path, monkeypatch, capsys):
    path = write_nb(tmp_path / "lesson.ipynb", notebook.build("reference"))
    monkeypatch.setattr(notebook, "REFERENCE", tmp_path / "no-reference")  # as in a student release
    sub = notebook.extract(path, tmp_path / "sub")
    assert "from .additive import BahdanauAttention\nfrom .encoder import EncoderAll\n" in (sub / "decoder.py").read_text()
    assert notebook.graded_files(sub) and kernel.check("context", notebook=path)


def exercises_copy(where: Path, cells: dict[str, str] | None = None, files: dict[str, str] | None = None) -> Path:
    """A copy of exercises/ (stubs and notebook) with some notebook cells and some .py files replaced."""
    import shutil

    shutil.copytree(notebook.EXERCISES, where)
    nb = ipynb.read(where / "lesson.ipynb")
    for cell in nb.cells:
        piece = ipynb._piece_of(cell)
        if piece in (cells or {}):
            cell.source = cells[piece]
    write_nb(where / "lesson.ipynb", nb)
    for module, text in (files or {}).items():
        (where / f"{module}.py").write_text(text)
    return where


def test_a_piece_is_graded_from_its_py_file_unless_that_file_is_the_untouched_stub(tmp_path):
    ref = ipynb.piece_cells(notebook.build("reference"))
    stub_crlf = (notebook.EXERCISES / "luong.py").read_text().replace("\n", "\r\n")
    folder = exercises_copy(tmp_path / "exercises", cells={p: ref[p] for p in ("encoder", "additive", "luong", "decoder")},
                            files={"encoder": (notebook.REFERENCE / "encoder.py").read_text(), "luong": stub_crlf})
    (folder / "decoder.py").unlink()
    files = notebook.graded_files(folder)
    assert files == {"encoder": "encoder.py",  # both edited: the .py file wins
                     "additive": "lesson.ipynb",  # untouched stub, filled cell
                     "context": "context.py",  # both still stubs
                     "luong": "lesson.ipynb",  # the stub with Windows line endings is still untouched
                     "decoder": "lesson.ipynb",  # no .py file at all
                     "evaluation": "evaluation.py"}
    combined, same = notebook.combine(folder, tmp_path / "combined")
    assert same == files and combined == tmp_path / "combined"
    assert (combined / "additive.py").read_text() == ipynb.module_text("additive", ref["additive"])
    assert (combined / "encoder.py").read_text() == (folder / "encoder.py").read_text()
    line = notebook.describe(files)
    assert "\n" not in line and "lesson.ipynb" in line and "additive, luong, decoder" in line and "encoder.py" in line


def test_a_folder_whose_notebook_adds_nothing_is_graded_as_it_is(tmp_path):
    folder = exercises_copy(tmp_path / "exercises")
    assert notebook.combine(folder, tmp_path / "combined") == (folder, {p: f"{p}.py" for p in PIECES})
    assert not (tmp_path / "combined").exists()
    assert notebook.describe(notebook.graded_files(folder)).startswith("graded: the .py files (encoder.py, ")


def test_a_linked_py_file_is_carried_as_a_link_so_staging_still_refuses_it(tmp_path):
    ref = ipynb.piece_cells(notebook.build("reference"))
    folder = exercises_copy(tmp_path / "exercises", cells={"additive": ref["additive"]})
    (folder / "context.py").unlink()
    (folder / "context.py").symlink_to(notebook.REFERENCE / "context.py")
    combined, files = notebook.combine(folder, tmp_path / "combined")
    assert files["context"] == "context.py" and (combined / "context.py").is_symlink()
    report = grade_dict(combined, ["context"], QUICK)
    assert report["score"] == 0 and "symbolic link" in report["pieces"][0]["cases"][0]["message"]


def test_grade_of_an_exercises_folder_takes_the_cell_of_an_untouched_stub_and_says_so(tmp_path):
    import subprocess
    import sys

    ref = ipynb.piece_cells(notebook.build("reference"))
    exercises_copy(tmp_path / "exercises", cells={"context": ref["context"]})
    done = subprocess.run([sys.executable, "-m", "grader", "context", "additive", "--quick", "--format", "json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert {p["name"]: p["score"] for p in json.loads(done.stdout)["pieces"]} == {"context": 9, "additive": 0}
    said = "graded from lesson.ipynb (their .py files are untouched stubs or absent): context; from the .py files: "
    assert said in done.stderr


def test_check_of_a_training_piece_says_the_quick_run_left_the_training_case_out(tmp_path, capsys):
    path = write_nb(tmp_path / "lesson.ipynb", notebook.build("reference"))
    kernel.check("decoder", notebook=path)
    out = capsys.readouterr().out
    assert "quick run: 1 training case(s) worth" in out and "left out; this is not the grade" in out


def test_release_solutions_without_the_notebook_extras_says_which_extra_and_writes_nothing(tmp_path):
    import subprocess
    import sys

    hide = ("import importlib.util as u, sys; real = u.find_spec; "
            "u.find_spec = lambda name, *a: None if name == 'nbclient' else real(name, *a); "
            "from grader.cli import cli; cli(sys.argv[1:])")
    done = subprocess.run([sys.executable, "-c", hide, "release", "solutions", str(tmp_path / "sol")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "needs nbclient: pip install -e '.[notebook]'" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "sol").exists()


def test_a_solution_notebook_that_fails_to_run_is_one_line_and_writes_nothing(tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    from grader.verbs import release

    def fail(self, **kwargs):
        raise RuntimeError("Kernel died before replying to kernel_info\nNoSuchKernel: python3")

    monkeypatch.setattr(nbclient.NotebookClient, "execute", fail)
    with pytest.raises(release.ReleaseError) as info:
        release.solutions(tmp_path / "sol")
    assert "\n" not in str(info.value) and "NoSuchKernel: python3" in str(info.value) and "--no-execute" in str(info.value)
    assert not (tmp_path / "sol").exists()


def test_the_stub_notebook_runs_top_to_bottom_saying_in_one_line_what_each_cell_still_needs(tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = notebook.build("stubs")
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    waiting = [c for c in code if "with unfinished()" in c.source]
    assert waiting
    for cell in waiting:
        lines = [ln for o in cell.outputs for ln in o.get("text", "").splitlines() if ln.startswith("not run yet: ")]
        assert len(lines) == 1, (cell.source[:80], cell.outputs)
    assert "piece 'decoder': write" in "".join(o.get("text", "") for o in waiting[0].outputs)
    assert "Total: 0/" in "".join(o.get("text", "") for o in code[-1].outputs)  # check() of the stub still reports


def test_the_readme_says_where_the_notebook_is_introduced_how_an_instructor_sees_it_solved():
    from grader import ROOT
    from grader.verbs import release

    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    intro = text[text.index("Prefer a notebook?"):]
    intro = intro[:intro.index("**Which file is graded:**")]
    assert "grade release solutions OUT" in intro and "lesson-solutions.ipynb" in intro
    assert "lesson-solutions.ipynb" in Path(release.__file__).read_text(encoding="utf-8")  # the file it writes
