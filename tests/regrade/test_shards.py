"""`grade batch --shard K/N` and `grade batch merge`: the class split, the merge, its refusals and a resumed shard."""
from __future__ import annotations

import json
import random
import shutil
import zipfile

import pytest
from click.testing import CliRunner

from grader import ROOT
from grader.cli import cli
from grader.regrade import shard as sharding

from helpers import REFERENCE

NAMES = [f"attention-lab-{who}" for who in ("ada", "Bob", "bob-2", "carol", "dan", "eve", "fay", "gus", "hal",
                                             "ivy", "jo", "kai", "lu")] + [f"s{i:03d}" for i in range(24)]


@pytest.mark.parametrize("n", [1, 2, 3, 7, len(NAMES), len(NAMES) + 5])
def test_the_shards_partition_the_class_in_parts_that_differ_by_one_at_most(n):
    parts = [sharding.members(NAMES, sharding.Shard(k, n)) for k in range(1, n + 1)]
    everyone = [name for part in parts for name in part]
    assert sorted(everyone) == sorted(NAMES)  # every student exactly once
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1
    shuffled = random.Random(n).sample(NAMES, len(NAMES))  # listed in another order: the same parts
    assert [sharding.members(shuffled, sharding.Shard(k, n)) for k in range(1, n + 1)] == parts


def test_a_student_keeps_their_part_whatever_else_the_order_and_not_only_by_position():
    first = sharding.assign(NAMES, 5)
    assert sharding.assign(list(reversed(NAMES)), 5) == first
    assert len({first[name] for name in NAMES[:10]}) > 1  # dealt by hash, not in runs of the listing


@pytest.mark.parametrize("env, k", [
    ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "4"}, 1),  # --array=0-3
    ({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "4"}, 4),  # --array=1-4
    ({"JOB_COMPLETION_INDEX": "2"}, 3),  # a Kubernetes Indexed Job counts from 0
])
def test_auto_takes_the_part_from_the_engines_own_variables(env, k):
    assert sharding.parse("auto/4", env) == sharding.Shard(k, 4)


@pytest.mark.parametrize("spec, env, said", [
    ("3", {}, "is not K/N"),
    ("0/4", {}, "must be 1 to 4"),
    ("5/4", {}, "must be 1 to 4"),
    ("1/0", {}, "number of parts"),
    ("auto/4", {}, "neither is set here"),
    ("auto/4", {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "5"}, "has 5 tasks"),
])
def test_a_shard_that_names_no_part_is_one_line_naming_what_to_give(spec, env, said):
    with pytest.raises(sharding.ShardError, match=said):
        sharding.parse(spec, env)


def test_the_command_line_refuses_a_bad_shard_without_a_traceback(tmp_path):
    result = CliRunner().invoke(cli, ["batch", str(tmp_path), "--shard", "4/3"])
    assert result.exit_code == 2 and "Invalid value for --shard" in result.output and "Traceback" not in result.output


# --- a small class, graded whole and in shards (the context piece only, quick: a few seconds a student) ------

def _class(root):
    """Six submissions of every kind: repositories, a bare folder, a zip, an unreadable zip, a stub."""
    for who, context in (("ada", REFERENCE), ("bob", REFERENCE), ("cy", ROOT / "exercises"), ("dee", REFERENCE)):
        repo = root / f"attention-lab-{who}"
        shutil.copytree(context, repo / "exercises")
        (repo / ".git").mkdir()
    with zipfile.ZipFile(root / "eli.zip", "w") as zf:
        zf.write(REFERENCE / "context.py", "eli/context.py")
    (root / "fox.zip").write_text("not a zip")
    return root


@pytest.fixture
def one_piece(monkeypatch):
    from grader.core.pieces import PIECES
    from grader.verbs import batch as verb

    monkeypatch.setattr(verb, "PIECES", {"context": PIECES["context"]})


def _batch(args):
    result = CliRunner().invoke(cli, ["batch", *map(str, args), "--quick", "-j", "2", "--seed", "7"])
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def graded_class(tmp_path, one_piece):
    """The class graded whole (tmp/whole) and in three shards (tmp/parts/k), and the folder it came from."""
    klass = _class(tmp_path / "class")
    _batch([klass, "--out", tmp_path / "whole" / "grades.csv"])
    for k in (1, 2, 3):
        _batch([klass, "--shard", f"{k}/3", "--out", tmp_path / "parts" / str(k) / "grades.csv"])
    return tmp_path


def _merge(parts, out):
    return CliRunner().invoke(cli, ["batch", "merge", *map(str, parts), "--out", str(out)])


@pytest.mark.slow
def test_the_merged_gradebook_is_byte_for_byte_the_unsharded_one_and_every_refusal_is_one_line(graded_class):
    tmp = graded_class
    parts = [tmp / "parts" / str(k) for k in (1, 2, 3)]
    result = _merge(parts, tmp / "merged" / "grades.csv")
    assert result.exit_code == 0, result.output
    assert (tmp / "merged" / "grades.csv").read_bytes() == (tmp / "whole" / "grades.csv").read_bytes()
    assert sorted(p.name for p in (tmp / "merged" / "grades-reports").iterdir()) == \
        sorted(p.name for p in (tmp / "whole" / "grades-reports").iterdir())
    merged = json.loads((tmp / "merged" / "grades-manifest.json").read_text())
    assert {s: e["ended"] for s, e in merged["students"].items()}["fox"] == "error"
    assert (tmp / "merged" / "grades-class.html").is_file()
    shard_sizes = [len(json.loads((p / "grades-manifest.json").read_text())["students"]) for p in parts]
    assert sorted(shard_sizes) == [2, 2, 2]

    # a missing shard: named with its students, so that it alone is rerun
    missing = json.loads((parts[1] / "grades-manifest.json").read_text())["students"]
    result = _merge([parts[0], parts[2]], tmp / "m2" / "grades.csv")
    assert result.exit_code == 1 and "shard 2/3 is missing: its students are " + ", ".join(sorted(missing)) \
        in result.output and "Traceback" not in result.output
    assert not (tmp / "m2" / "grades.csv").exists()
    # a shard given twice (a copy of its folder)
    shutil.copytree(parts[0], tmp / "again")
    result = _merge([*parts, tmp / "again"], tmp / "m3" / "grades.csv")
    assert result.exit_code == 1 and "shard 1/3 is given twice" in result.output

    def tampered(k: int, change) -> list:
        """The parts with shard k's manifest copied and changed."""
        copy = tmp / f"changed-{k}-{len(list(tmp.iterdir()))}"
        shutil.copytree(parts[k - 1], copy)
        m = json.loads((copy / "grades-manifest.json").read_text())
        change(m)
        (copy / "grades-manifest.json").write_text(json.dumps(m))
        return [copy if i == k - 1 else p for i, p in enumerate(parts)]

    for key, value, said in (("seed", "0" * 64, "another seed"), ("cases", "1" * 64, "another hidden cases"),
                             ("grader", {"version": "9", "digest": "x"}, "another grader"),
                             ("mode", "full", "another mode")):
        result = _merge(tampered(2, lambda m, key=key, value=value: m.update({key: value})), tmp / "m" / "g.csv")
        assert result.exit_code == 1 and said in result.output, result.output
    result = _merge(tampered(3, lambda m: m["class"].update(digest="2" * 64)), tmp / "m" / "g.csv")
    assert "another class list" in result.output
    one = sorted(json.loads((parts[0] / "grades-manifest.json").read_text())["students"])[0]
    row = json.loads((parts[0] / "grades-manifest.json").read_text())["students"][one]
    result = _merge(tampered(2, lambda m: m["students"].update({one: row})), tmp / "m" / "g.csv")
    assert f"student {one} is in two shards" in result.output
    result = _merge(tampered(2, lambda m: m.update(finished=False)), tmp / "m" / "g.csv")
    assert "did not finish" in result.output and "it resumes where it stopped" in result.output


@pytest.mark.slow
def test_a_shard_that_died_is_rerun_alone_and_grades_only_the_students_it_had_left(tmp_path, one_piece, monkeypatch):
    from grader.regrade import book
    from grader.runner import schedule
    from grader.verbs import batch as verb

    klass = _class(tmp_path / "class")
    out = tmp_path / "part" / "grades.csv"
    quick = verb.Limits(30, 120, 6, True)
    rows: list[dict] = []
    real_add = book.Gradebook.add

    def killed_at_the_fourth_row(self, row, inputs=""):
        rows.append(row)
        if len(rows) == 4:  # ada's and bob's rows (the first wave: batch.WAVE at -j 1), cy's, then the kill
            raise KeyboardInterrupt  # not an exception the batch catches
        real_add(self, row, inputs)

    monkeypatch.setattr(book.Gradebook, "add", killed_at_the_fourth_row)
    with pytest.raises(KeyboardInterrupt):
        verb.main(submissions=[klass], out=out, reports=None, jobs=1, seed="7", progress=False, limits=quick,
                  shard=sharding.Shard(1, 1))
    monkeypatch.setattr(book.Gradebook, "add", real_add)
    journal = (tmp_path / "part" / "grades-journal.jsonl").read_text().splitlines()
    assert len(journal) == 1 + 3  # the header and the three students graded before the kill
    assert not json.loads((tmp_path / "part" / "grades-manifest.json").read_text())["finished"]
    graded: list[str] = []
    real_units = schedule.Grading.run_units
    monkeypatch.setattr(schedule.Grading, "run_units",
                        lambda self, piece, server: (graded.append(piece), real_units(self, piece, server))[1])
    verb.main(submissions=[klass], out=out, reports=None, jobs=1, seed="7", progress=False, limits=quick,
              shard=sharding.Shard(1, 1))
    manifest = json.loads((tmp_path / "part" / "grades-manifest.json").read_text())
    assert manifest["finished"] and manifest["resumed"] == 3 and len(graded) == 2  # 5 gradable, 3 kept
    whole = tmp_path / "whole" / "grades.csv"
    verb.main(submissions=[klass], out=whole, reports=None, jobs=1, seed="7", progress=False, limits=quick)
    merged = _merge([out], tmp_path / "merged" / "grades.csv")
    assert merged.exit_code == 0, merged.output
    assert (tmp_path / "merged" / "grades.csv").read_bytes() == whole.read_bytes()
    # a rerun with another seed grades everyone again: the journal is for the same inputs only
    graded.clear()
    verb.main(submissions=[klass], out=out, reports=None, jobs=1, seed="8", progress=False, limits=quick,
              shard=sharding.Shard(1, 1))
    assert len(graded) == 5


def test_a_class_report_that_fails_leaves_the_gradebook_standing_and_says_so(tmp_path, one_piece, monkeypatch):
    from grader.regrade import classreport

    def broken(*args, **kwargs):
        raise RuntimeError("a report no check foresaw")

    monkeypatch.setattr(classreport, "write", broken)
    student = tmp_path / "ada"
    shutil.copytree(REFERENCE, student)
    result = CliRunner().invoke(cli, ["batch", str(student), "--quick", "-j", "1", "--out", str(tmp_path / "g.csv")])
    assert result.exit_code == 0, result.output
    assert "no class report (it failed: RuntimeError: a report no check foresaw)" in result.output
    assert (tmp_path / "g.csv").read_text().count("\n") == 2  # the header and ada's row
