"""Issue 32 §2 and §3: `grade release solutions` says each code cell as it is run (the run takes minutes), and the
notebook it publishes carries no note about the worker jail of the machine that ran it."""
from __future__ import annotations

import json

import pytest

from grader.lesson import notebook
from grader.runner.report import to_text
from grader.runner.results import CaseResult, PieceRun
from grader.verbs import release


def test_each_executed_code_cell_is_one_line_with_its_place_among_the_code_cells_its_id_and_its_time(monkeypatch):
    nb = notebook.build("reference")
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    said: list[str] = []
    progress = release.Progress(nb, said.append)
    clock = iter([100.0, 102.125])
    monkeypatch.setattr(release.time, "monotonic", lambda: next(clock))
    index = code[6]
    progress.start(cell=nb.cells[index], cell_index=index)
    progress.done(cell=nb.cells[index], cell_index=index, execute_reply={"content": {"status": "ok"}})
    assert said == [f"ran cell 7 of {len(code)} ({nb.cells[index].id}) in 2.1 s"]


def test_the_progress_and_the_jail_note_stripping_are_wired_into_the_notebook_run(tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    note = to_text([PieceRun("additive", [CaseResult("test_x", 1, True, "")], jail=["unprivileged uid", "seccomp"])],
                   "<notebook cell>")
    assert "(isolation: this machine lacks 2 of the jail's layers" in note

    def execute(self, **kwargs):  # what nbclient does, cell by cell, without a kernel
        for index, cell in enumerate(self.nb.cells):
            if cell.cell_type != "code":
                continue
            self.on_cell_execute(cell=cell, cell_index=index)
            if cell.id == "cell-check-ipy":
                cell.outputs = [nbclient.client.NotebookNode(output_type="stream", name="stdout", text=note + "\n")]
            self.on_cell_executed(cell=cell, cell_index=index, execute_reply={"content": {"status": "ok"}})
        assert self.coalesce_streams  # a report printed in pieces is stripped whole
        return self.nb

    monkeypatch.setattr(nbclient.NotebookClient, "execute", execute)
    said: list[str] = []
    release.solutions(tmp_path / "sol", say=said.append)
    total = sum(c.cell_type == "code" for c in notebook.build("reference").cells)
    assert len(said) == total and said[0].startswith(f"ran cell 1 of {total} (cell-setup-ipy) in ")
    published = json.loads((tmp_path / "sol" / "lesson-solutions.ipynb").read_text())
    check = next(c for c in published["cells"] if c.get("id") == "cell-check-ipy")
    text = "".join(check["outputs"][0]["text"])
    assert "note:" not in text and "root here" not in text and text.rstrip().endswith("Total: 1/1")


def test_the_hooks_are_ones_the_installed_nbclient_calls_on_a_real_kernel(tmp_path):
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("prose"), nbformat.v4.new_code_cell("1 + 1"),
                                         nbformat.v4.new_code_cell("print('hi')")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    said: list[str] = []
    release.client(nbclient.NotebookClient, nb, str(tmp_path), release.Progress(nb, said.append)).execute()
    assert [line.split(" (")[0] for line in said] == ["ran cell 1 of 2", "ran cell 2 of 2"]
