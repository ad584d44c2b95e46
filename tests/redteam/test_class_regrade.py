"""Red team, round three: the class regrade's newer surfaces as a student would poison them.

`grade batch --before` clones each repository with git, so the repository's `.git` is hostile input too (a
folder handed in carries one of the student's making); the journal a rerun resumes from, the gradebook's
companion files, the merge of the shards' parts, and the two HTML reports the instructor opens (similarity,
class) all take text a student chose. Each test asserts the safe behaviour: an error row or the student's own
marks, never another's; nothing read or run outside the student's folder; no markup or formula reaching the
instructor; no stall and no crash of the batch's end.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from grader.core.pieces import MODULES, PIECES
from grader.regrade import deadline, digests, manifests, similarity, similarity_findings
from grader.regrade.book import Files
from grader.regrade.shard import Shard, class_digest, members
from grader.verbs import batch as batch_verb
from grader.verbs import merge as merge_verb
from grader.core.files import Refused

from helpers import QUICK, REFERENCE, make_submission

from .harness import EXERCISES, FULL

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

PIECE = "context"
DEADLINE = "2026-12-01T23:59:00-05:00"
ON_TIME = "2026-11-30T12:00:00Z"
git_needed = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


# --- helpers ---------------------------------------------------------------------------------------------

def _env(when: str = ON_TIME) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
            "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_NAME": "s",
            "GIT_AUTHOR_EMAIL": "s@example.com", "GIT_COMMITTER_NAME": "s", "GIT_COMMITTER_EMAIL": "s@example.com",
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str, data: bytes | None = None, when: str = ON_TIME) -> str:
    done = subprocess.run(["git", *args], cwd=repo, env=_env(when), check=True, capture_output=True, input=data)
    return done.stdout.decode().strip()


def commit(repo: Path, files: dict, when: str = ON_TIME) -> str:
    """Commit `files` (name -> source path or text) at `when`, as the student's machine dates it."""
    for name, what in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(what.read_bytes() if hasattr(what, "read_bytes") else what.encode())
    if not (repo / ".git").exists():
        repo.mkdir(parents=True, exist_ok=True)
        git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A", when=when)
    git(repo, "commit", "-q", "-m", "work", when=when)
    return git(repo, "rev-parse", "HEAD")


def solved_repo(where: Path) -> tuple[Path, str]:
    """An honest repository: the reference's context.py committed on time."""
    return where, commit(where, {"exercises/context.py": REFERENCE / "context.py"})


def run_batch(subs: list[Path], tmp_path: Path, monkeypatch, *, before: str | None = DEADLINE, jobs: int = 2,
              reports: Path | None = None, out: Path | None = None) -> dict[str, dict]:
    monkeypatch.setattr(batch_verb, "PIECES", {PIECE: PIECES[PIECE]})
    out = out or tmp_path / "book" / "grades.csv"
    batch_verb.main(submissions=subs, out=out, reports=reports, jobs=jobs, seed="0", limits=QUICK, progress=False,
                    before=deadline.parse(before) if before else None)
    return {r["student"]: r for r in csv.DictReader(out.open(encoding="utf-8"))}


def full(row: dict) -> None:
    assert row["status"].startswith("ok") and int(row[PIECE]) == FULL[PIECE], row


def nothing(row: dict) -> None:
    assert int(row[PIECE]) == 0 and int(row["total"]) == 0, row


# --- 1. .git pointing git outside the student's folder ------------------------------------------------------

def _pointing(kind: str, alice: Path, sha: str, mallory: Path) -> None:
    """mallory's repository made to read alice's through git's own indirections, never a link at .git itself."""
    dot = mallory / ".git"
    if kind == "commondir":  # a worktree's git folder: objects, refs and config are the common dir's
        dot.mkdir(parents=True)
        (dot / "HEAD").write_text("ref: refs/heads/main\n")
        (dot / "commondir").write_text(os.path.relpath(alice / ".git", dot) + "\n")
    elif kind == "linked-objects-and-refs":  # real .git folder, its insides links
        dot.mkdir(parents=True)
        (dot / "HEAD").write_text("ref: refs/heads/main\n")
        (dot / "objects").symlink_to(alice / ".git" / "objects")
        (dot / "refs").symlink_to(alice / ".git" / "refs")
    elif kind in ("alternates-and-linked-ref", "alternates-and-known-sha"):
        mallory.mkdir(parents=True)
        git(mallory, "init", "-q", "-b", "main")
        (dot / "objects" / "info").mkdir(parents=True, exist_ok=True)
        (dot / "objects" / "info" / "alternates").write_text(str(alice / ".git" / "objects") + "\n")
        ref = dot / "refs" / "heads" / "main"
        ref.parent.mkdir(parents=True, exist_ok=True)
        if kind == "alternates-and-linked-ref":
            ref.symlink_to(alice / ".git" / "refs" / "heads" / "main")  # git reads through a non-symref link
        else:
            ref.write_text(sha + "\n")  # a commit whose id is known (the template's is every student's)
    elif kind == "root-bare-repository":  # .git an empty folder: git then takes the folder itself as the repo
        dot.mkdir(parents=True)
        (mallory / "HEAD").write_text("ref: refs/heads/main\n")
        (mallory / "commondir").write_text(os.path.relpath(alice / ".git", mallory) + "\n")
        (mallory / "objects").mkdir()
        (mallory / "refs").mkdir()
    else:
        raise AssertionError(kind)


POINTERS = ["commondir", "linked-objects-and-refs", "alternates-and-linked-ref", "alternates-and-known-sha",
            "root-bare-repository"]


@git_needed
@pytest.mark.parametrize("kind", POINTERS)
def test_a_git_folder_that_points_git_at_another_students_repository_is_refused_never_graded_as_theirs(
        tmp_path, kind):
    alice, sha = solved_repo(tmp_path / "class" / "lab-alice")
    mallory = tmp_path / "class" / "lab-mallory"
    _pointing(kind, alice, sha, mallory)
    try:
        folder, found = deadline.checkout(mallory, deadline.parse(DEADLINE), tmp_path / "work")
    except Refused:
        return  # safe: an error row
    got = (folder / "exercises" / "context.py").read_bytes() if (folder / "exercises" / "context.py").exists() else b""
    assert got != (REFERENCE / "context.py").read_bytes() and found.sha != sha, \
        f"{kind}: mallory's regrade checked out alice's commit {found.sha}"


@git_needed
def test_a_fifo_inside_the_git_folder_is_refused_at_once_and_leaves_no_git_blocked_behind(tmp_path, monkeypatch):
    monkeypatch.setattr(deadline, "GIT_SECONDS", 6)
    mallory, _ = solved_repo(tmp_path / "lab-mallory")
    fifo = mallory / ".git" / "packed-refs"  # upload-pack opens it to list the refs: a reader blocks forever
    os.mkfifo(fifo)
    start = time.monotonic()
    try:
        with pytest.raises(Refused):
            deadline.checkout(mallory, deadline.parse(DEADLINE), tmp_path / "work")
        assert time.monotonic() - start < 3, "each such repository costs a worker GIT_SECONDS"
    finally:  # unblock any reader left behind (an orphaned upload-pack), so the test leaves no process
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        time.sleep(0.5)
        os.close(fd)


@git_needed
def test_a_partial_clone_configured_to_lazily_fetch_through_an_ext_command_runs_nothing(tmp_path):
    planted = tmp_path / "ran"
    mallory = tmp_path / "lab-mallory"
    commit(mallory, {"exercises/context.py": REFERENCE / "context.py", "notes.txt": "a blob to lose\n"})
    blob = git(mallory, "rev-parse", "HEAD:notes.txt")
    (mallory / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # missing: a promisor would fetch it
    with (mallory / ".git" / "config").open("a") as f:
        f.write("[core]\n\trepositoryformatversion = 1\n[extensions]\n\tpartialClone = origin\n"
                f"[remote \"origin\"]\n\turl = ext::sh -c touch% {planted}\n\tpromisor = true\n"
                "[protocol \"ext\"]\n\tallow = always\n[protocol]\n\tallow = always\n"
                f"[core]\n\talternateRefsCommand = touch {planted}\n[include]\n\tpath = {tmp_path / 'other.cfg'}\n")
    (tmp_path / "other.cfg").write_text(f"[uploadpack]\n\tpackObjectsHook = touch {planted}\n")
    with pytest.raises(Refused):  # the object is missing: git cannot read it, and runs nothing to fetch it
        deadline.checkout(mallory, deadline.parse(DEADLINE), tmp_path / "work")
    assert not planted.exists()


def _bomb(repo: Path, entries: list[str]) -> None:
    """Commit (on time, the last before the deadline) a tree of `entries` (mktree lines) beside the repository's
    own files."""
    top = git(repo, "ls-tree", "HEAD")
    tree = git(repo, "mktree", data=("\n".join([top, *entries]) + "\n").encode())
    head = git(repo, "commit-tree", tree, "-p", "HEAD", "-m", "bomb", when="2026-11-30T13:00:00Z")
    git(repo, "update-ref", "refs/heads/main", head)


@git_needed
def test_a_commit_whose_tree_expands_to_far_more_bytes_than_its_pack_is_refused_before_checkout(
        tmp_path, monkeypatch):
    """One 1 MiB blob of zeros (a kB in the pack) named 64 times: a checkout writes 64 MiB. Scaled to real caps,
    a 100 MB blob (GitHub's limit per file) a thousand times over fills the instructor's disk."""
    monkeypatch.setattr(deadline, "MAX_CHECKOUT_BYTES", 16 << 20, raising=False)
    mallory, _ = solved_repo(tmp_path / "lab-mallory")
    blob = git(mallory, "hash-object", "-w", "--stdin", data=bytes(1 << 20))
    inner = git(mallory, "mktree", data="".join(f"100644 blob {blob}\tf{i}\n" for i in range(64)).encode())
    _bomb(mallory, [f"040000 tree {inner}\tbomb"])
    with pytest.raises(Refused):
        deadline.checkout(mallory, deadline.parse(DEADLINE), tmp_path / "work")
    written = sum(p.stat().st_size for p in (tmp_path / "work").rglob("*") if p.is_file() and not p.is_symlink())
    assert written < 16 << 20


@git_needed
def test_a_commit_whose_nested_trees_expand_to_a_flood_of_files_is_refused_before_checkout(tmp_path, monkeypatch):
    """Trees reused inside trees: 100 x 100 entries here; three levels more are 10^10 files from a kB pack."""
    monkeypatch.setattr(deadline, "MAX_CHECKOUT_FILES", 2000, raising=False)
    mallory, _ = solved_repo(tmp_path / "lab-mallory")
    empty = git(mallory, "hash-object", "-w", "--stdin", data=b"")
    leaf = git(mallory, "mktree", data="".join(f"100644 blob {empty}\tf{i}\n" for i in range(100)).encode())
    mid = git(mallory, "mktree", data="".join(f"040000 tree {leaf}\td{i}\n" for i in range(100)).encode())
    _bomb(mallory, [f"040000 tree {mid}\tflood"])
    with pytest.raises(Refused):
        deadline.checkout(mallory, deadline.parse(DEADLINE), tmp_path / "work")
    assert sum(1 for _ in (tmp_path / "work").rglob("*")) < 2000


@git_needed
def test_a_commit_nested_deeper_than_pythons_recursion_limit_costs_only_its_own_row(tmp_path, monkeypatch):
    """A checkout 1500 folders deep: Python 3.11's shutil.rmtree recurses once a level, and a RecursionError is
    no OSError, so ignore_errors lets it out of the batch's cleanup of that student's folder."""
    klass = tmp_path / "class"
    solved_repo(klass / "lab-alice")
    mallory, _ = solved_repo(klass / "lab-mallory")
    deep = mallory
    for _ in range(1200):  # one level at a time: Path.mkdir(parents=True) itself recurses
        deep = deep / "d"
        os.mkdir(deep)
    (deep / "x").write_text("deep\n")
    commit(mallory, {}, when="2026-11-30T13:00:00Z")
    temp = _private_tmp(tmp_path, monkeypatch)
    try:
        rows = run_batch([klass], tmp_path, monkeypatch)
        full(rows["lab-alice"])
        assert "lab-mallory" in rows
    finally:  # nothing this deep is left for pytest's own (recursive) cleanup of old tmp folders
        for top in (mallory / "d", temp):
            _remove_tree(top)


@git_needed
def test_a_ref_named_deeper_than_pythons_recursion_limit_costs_only_its_own_row(tmp_path, monkeypatch):
    """The same through a branch's name: HEAD at refs/heads/d/d/.../x (in packed-refs, so no folder of the
    student's is deep); the clone writes that branch as a file 1200 folders down."""
    klass = tmp_path / "class"
    solved_repo(klass / "lab-alice")
    mallory, sha = solved_repo(klass / "lab-mallory")
    ref = "refs/heads/" + "d/" * 1200 + "x"
    (mallory / ".git" / "packed-refs").write_text(f"{sha} {ref}\n")
    (mallory / ".git" / "HEAD").write_text(f"ref: {ref}\n")
    temp = _private_tmp(tmp_path, monkeypatch)
    try:
        rows = run_batch([klass], tmp_path, monkeypatch)
        full(rows["lab-alice"])
        assert "lab-mallory" in rows
    finally:
        _remove_tree(temp)


def _private_tmp(tmp_path: Path, monkeypatch) -> Path:
    """The batch's own temporary folder under this test's, so that cleaning up touches no other run's."""
    temp = tmp_path / "tmp"
    temp.mkdir()

    class Here:
        def __getattr__(self, name):
            return getattr(tempfile, name)

        def TemporaryDirectory(self, *args, **kwargs):  # noqa: N802 - tempfile's name
            return tempfile.TemporaryDirectory(*args, dir=temp, **kwargs)

    monkeypatch.setattr(batch_verb, "tempfile", Here())
    return temp


def _remove_tree(top: Path) -> None:
    """shutil.rmtree without recursion."""
    stack = [str(top)]
    while stack:
        try:
            entries = list(os.scandir(stack[-1]))
        except FileNotFoundError:
            stack.pop()
            continue
        folders = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        for e in entries:
            if not e.is_dir(follow_symlinks=False):
                os.unlink(e.path)
        if folders:
            stack += folders
        else:
            os.rmdir(stack.pop())


@git_needed
def test_committed_links_filters_and_submodules_earn_nothing_and_run_nothing_in_the_regrade(tmp_path, monkeypatch):
    klass = tmp_path / "class"
    alice, alice_sha = solved_repo(klass / "lab-alice")
    planted = tmp_path / "ran"
    stub = EXERCISES / "context.py"
    # a piece committed as a link to the reference (absolute), the whole exercises/ as one (relative guess)
    abs_link = klass / "lab-mallory"
    commit(abs_link, {"exercises/encoder.py": EXERCISES / "encoder.py"})
    (abs_link / "exercises" / "context.py").symlink_to(REFERENCE / "context.py")
    commit(abs_link, {})
    rel_link = klass / "lab-oscar"
    commit(rel_link, {"README.md": "hi\n"})
    (rel_link / "exercises").symlink_to(os.path.relpath(REFERENCE, rel_link))
    commit(rel_link, {})
    # a smudge filter and ident named by .gitattributes, the filter defined in the student's config
    filt = klass / "lab-trent"
    commit(filt, {".gitattributes": "* filter=evil ident\n",
                  "exercises/context.py": stub})
    with (filt / ".git" / "config").open("a") as f:
        f.write(f"[filter \"evil\"]\n\tsmudge = sh -c 'touch {planted}; cat {REFERENCE / 'context.py'}'\n"
                f"\tprocess = sh -c 'touch {planted}'\n\trequired = true\n")
    # exercises/ a submodule at alice's commit, its url alice's repository: a clone that recursed would grade hers
    sub = klass / "lab-walter"
    commit(sub, {".gitmodules": "[submodule \"exercises\"]\n\tpath = exercises\n\turl = ../lab-alice\n"})
    git(sub, "update-index", "--add", "--cacheinfo", f"160000,{alice_sha},exercises")
    git(sub, "commit", "-q", "-m", "submodule")
    with (sub / ".git" / "config").open("a") as f:
        f.write("[submodule]\n\trecurse = true\n[fetch]\n\trecurseSubmodules = true\n")
    rows = run_batch([klass], tmp_path, monkeypatch)
    full(rows["lab-alice"])
    for name in ("lab-mallory", "lab-oscar", "lab-trent", "lab-walter"):
        nothing(rows[name])
    assert rows["lab-oscar"]["status"].startswith("error") and "symbolic link" in rows["lab-oscar"]["status"]
    assert not planted.exists()


# --- 2. the journal a rerun resumes from ---------------------------------------------------------------------

def test_a_rerun_regrades_a_student_whose_files_changed_and_never_hands_them_anothers_row(tmp_path, monkeypatch):
    klass = tmp_path / "class"
    alice = make_submission(klass / "lab-alice" / "exercises")
    mallory = make_submission(klass / "lab-mallory" / "exercises", base=EXERCISES)
    first = run_batch([klass], tmp_path, monkeypatch, before=None)
    full(first["lab-alice"])
    nothing(first["lab-mallory"])
    # alice breaks hers keeping its size; mallory takes alice's old file: each row must follow its own files now
    solved = (alice / "context.py").read_bytes()
    broken = re.sub(rb"return torch\.bmm", b"return torch.add", solved, count=1)
    assert len(broken) == len(solved) and broken != solved
    stat = (alice / "context.py").stat()
    (alice / "context.py").write_bytes(broken)
    os.utime(alice / "context.py", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    (mallory / "context.py").write_bytes(solved)
    again = run_batch([klass], tmp_path, monkeypatch, before=None)
    assert int(again["lab-alice"][PIECE]) < FULL[PIECE], again["lab-alice"]
    full(again["lab-mallory"])
    manifest = json.loads((tmp_path / "book" / "grades-manifest.json").read_text())
    assert manifest["resumed"] == 0


def test_a_student_named_like_the_gradebooks_companions_overwrites_none_of_them(tmp_path, monkeypatch):
    """With --reports beside the CSV (the option's help says the default is "next to the CSV"), a student named
    grades-manifest would write their report over the manifest, and the manifest over their report."""
    klass = tmp_path / "class"
    for name in ("grades-manifest", "grades", "grades-journal", "grades-class", "grades-code", "lab-alice"):
        make_submission(klass / name / "exercises")
    out = tmp_path / "book" / "grades.csv"
    try:
        rows = run_batch([klass], tmp_path, monkeypatch, before=None, reports=out.parent, out=out)
    except Exception as e:  # noqa: BLE001 - refusing such a --reports up front is safe too
        assert "reports" in str(e).lower(), e
        return
    for row in rows.values():
        full(row)
    manifest = json.loads((out.parent / "grades-manifest.json").read_text())
    assert manifest.get("format") == manifests.FORMAT and len(manifest["students"]) == 6
    for name in rows:  # each student's own report, somewhere beside the gradebook
        found = [p for p in out.parent.rglob("*.json") if json.loads(p.read_text()).get("student") == name]
        assert found, f"{name}'s report was overwritten by a companion file"


# --- 3. the merge of the shards' parts ---------------------------------------------------------------------------

HOSTILE = ["=HYPERLINK(\"http://evil/\",\"x\")", "+1+1", "-2+3", "@SUM(1)", "\t=1", " =1",
           "<script>alert(1)</script>", "</td><img src=x onerror=alert(1)>", "\u202e<b>gnp.exe", "line\nbreak\r=1"]


def test_merged_parts_with_hostile_statuses_and_paths_reach_neither_the_spreadsheet_nor_the_browser(tmp_path):
    names = [f"lab-s{i}" for i in range(len(HOSTILE))]
    setting = digests.settings(seed="0", quick=True, limits={}, before=None, release=None, pieces=[PIECE])
    digest = class_digest(names)
    parts = []
    for k in (1, 2):
        files = Files.of(tmp_path / "parts" / str(k) / "grades.csv")
        files.reports.mkdir(parents=True)
        files.code.mkdir(parents=True)
        rows = []
        for name in members(names, Shard(k, 2)):
            text = HOSTILE[names.index(name)]
            rows.append({"student": name, PIECE: 0, "total": 0, "max_score": 10, "status": f"error: {text}"
                         if names.index(name) % 2 else text, "path": text, "release_files": f"CHANGED: +grader/{text}",
                         "commit": text, "committed": text, "late": 1})
        manifests.write_manifest(files, shard=(k, 2), names=names, class_digest=digest, setting=setting, rows=rows,
                            finished=True)
        parts.append(files.csv.parent)  # the shard's folder, as an artifact is downloaded
    out = tmp_path / "merged" / "grades.csv"
    merge_verb.main(parts=parts, out=out, progress=False)
    for row in csv.reader(out.open(encoding="utf-8", newline="")):
        for text in row:
            assert not text.lstrip().startswith(("=", "+", "-", "@", "\uff1d")), row
            assert not set(text) & set("\t\r\n"), row
    page = (out.parent / "grades-class.html").read_text()
    assert not re.search(r"<(script|img src=x|b>gnp)", page, re.I) and "\u202e" not in page


# --- 4. the similarity report ----------------------------------------------------------------------------------

def _code(tmp_path: Path, students: dict[str, dict[str, str]]) -> Path:
    code = tmp_path / "grades-code"
    for student, files in students.items():
        (code / student).mkdir(parents=True)
        for module, text in files.items():
            (code / student / f"{module}.py").write_bytes(text if isinstance(text, bytes) else text.encode())
    return code


def _stub(module: str) -> str:
    return (EXERCISES / f"{module}.py").read_text()


def _solved(module: str) -> str:
    return (REFERENCE / f"{module}.py").read_text()


@pytest.mark.parametrize("padding", ["blank", "stub-lines"])
def test_a_file_padded_to_the_size_cap_with_stub_lines_does_not_stall_the_similarity_report(tmp_path, padding):
    """The stub is diffed out of every file line by line (difflib, no autojunk): lines the stub holds, repeated
    to MAX_BYTES, make that diff quadratic, and the report runs after every student is graded."""
    padded = {}
    for m in MODULES:
        lines = [x for x in _stub(m).splitlines(keepends=True) if x.strip()] if padding == "stub-lines" else ["\n"]
        text, fill = _solved(m), "".join(lines)
        padded[m] = text + fill * ((similarity.MAX_BYTES - len(text) - 1) // len(fill))
        assert len(padded[m].encode()) <= similarity.MAX_BYTES
    code = _code(tmp_path, {"lab-alice": {m: _solved(m) for m in MODULES}, "lab-mallory": padded,
                            "lab-bob": {m: _stub(m) for m in MODULES}})
    start = time.monotonic()
    similarity.report(code, tmp_path / "similarity.html")
    assert time.monotonic() - start < 30, f"{time.monotonic() - start:.0f} s for one padded student"


def test_code_and_folders_made_to_break_the_similarity_report_are_skipped_or_shown_escaped(tmp_path):
    script = "</pre></details><span class='highlight-red'><script>alert(1)</script></span><pre>"
    copied = {m: _solved(m) + f"# {script}\nx = '{script}'\n" for m in MODULES}
    odd = {"context": "\x00" * 1000, "encoder": "#" * 200_000, "luong": "'''" + "\\" * 50_000, "additive": "",
           "decoder": b"\xff\xfe\xed\xa0\x80 invalid UTF-8\n" * 100}
    code = _code(tmp_path, {"lab-alice": {m: _solved(m) for m in MODULES}, "lab-mallory": copied, "lab-odd": odd})
    (code / "lab-odd" / "evaluation.py").mkdir()  # a folder where a file is expected
    os.mkfifo(code / "lab-alice-2")  # a FIFO where a student folder is expected
    (code / "lab-alice-3").mkdir()
    os.mkfifo(code / "lab-alice-3" / "context.py")  # and where a file is
    (code / "lab-link").symlink_to(code / "lab-alice")
    (code / "<img src=x>").mkdir()
    pairs = similarity.report(code, tmp_path / "similarity.html").pairs
    page = (tmp_path / "similarity.html").read_text()
    assert any({p["a"], p["b"]} == {"lab-alice", "lab-mallory"} for p in pairs)
    assert not re.search(r"<(script|img)", page, re.I)


def test_a_part_whose_row_names_another_student_than_its_entry_is_refused_by_the_merge(tmp_path):
    """Defence in depth: a part's entry for one student holding a row for another (a forged or stale part) would
    give a student two rows, or a row without being in the class list."""
    names = ["lab-alice", "lab-bob", "lab-carol", "lab-dave"]
    setting = digests.settings(seed="0", quick=True, limits={}, before=None, release=None, pieces=[PIECE])
    parts = []
    for k in (1, 2):
        files = Files.of(tmp_path / "parts" / str(k) / "grades.csv")
        files.reports.mkdir(parents=True)
        files.code.mkdir(parents=True)
        rows = [{"student": n, PIECE: 10 if n == "lab-alice" else 0, "total": 10 if n == "lab-alice" else 0,
                 "max_score": 10, "status": "ok", "path": n} for n in members(names, Shard(k, 2))]
        manifests.write_manifest(files, shard=(k, 2), names=names, class_digest=class_digest(names), setting=setting,
                            rows=rows, finished=True)
        parts.append(files)
    forged = json.loads(parts[1].manifest.read_text())
    victim = next(iter(forged["students"]))
    alice = json.loads(parts[0].manifest.read_text())["students"].get("lab-alice") or forged["students"]["lab-alice"]
    forged["students"][victim] = {"ended": "graded", "row": {**alice["row"], "student": "lab-mallory"}}
    parts[1].manifest.write_text(json.dumps(forged))
    with pytest.raises(merge_verb.MergeError):
        merge_verb.main(parts=[p.csv.parent for p in parts], out=tmp_path / "merged" / "grades.csv", progress=False)


def test_files_copied_among_many_students_are_tokenized_once_each_not_once_a_pair(tmp_path, monkeypatch):
    """Each file the page shows is fingerprinted again for its highlights (pygments: about 1.5 s for a file at
    MAX_BYTES). Once a pair, k students handing in one padded file cost k^2/2 pairs x 6 pieces x 2 files: 4 such
    students took 136 s, 15 would take half an hour, all after the last student is graded."""
    import copydetect

    made = []
    real = copydetect.CodeFingerprint

    def counting(file, *args, **kwargs):
        made.append(file)
        return real(file, *args, **kwargs)

    monkeypatch.setattr(copydetect, "CodeFingerprint", counting)
    monkeypatch.setattr(similarity_findings, "GROUP_FROM", 99)  # the five as ten pairs, each shown, not one group
    students = {f"lab-s{i}": {m: _solved(m) for m in MODULES} for i in range(5)}
    pairs = similarity.report(_code(tmp_path, students), tmp_path / "similarity.html").pairs
    assert len(pairs) == 10
    assert made.count("piece.py") <= len(students) * len(MODULES), made.count("piece.py")


# --- 8. the roster: the class list a student's name or folder must not bend ----------------------------------

def test_a_roster_students_folder_that_links_to_anothers_repository_is_their_error_row_never_the_others_marks(
        tmp_path, monkeypatch):
    """mallory's folder, named as her repository, is a link to alice's clone: it is never followed (her row is an
    error, alice keeps hers); her roster name, a formula across two lines, reaches the scores.csv as one line of
    text; carol, with no repository, has her row, and zoe's repository, not on the roster, is graded for nobody."""
    from grader.regrade import roster as rosters

    cls = tmp_path / "class"
    alice, _ = solved_repo(cls / "lab-alice")
    (cls / "lab-mallory").symlink_to(alice)
    solved_repo(cls / "lab-zoe")
    path = tmp_path / "roster.csv"
    path.write_text('username,first_name,role\nalice,Alice,student\nmallory,"=HYPERLINK(""http://x"")\n@x",student\n'
                    "carol,Carol,\n")
    monkeypatch.setattr(batch_verb, "PIECES", {PIECE: PIECES[PIECE]})
    out, scores = tmp_path / "book" / "grades.csv", tmp_path / "book" / "scores.csv"
    batch_verb.main(submissions=[cls], out=out, reports=None, jobs=2, seed="0", limits=QUICK, progress=False,
                    roster=rosters.read(path), prefix="lab-", scores=scores)
    rows = {r["student"]: r for r in csv.DictReader(out.open(encoding="utf-8"))}
    assert sorted(rows) == ["alice", "carol", "mallory"]
    full(rows["alice"])
    assert rows["mallory"]["status"].startswith("error: the submission is a symbolic link"), rows["mallory"]
    assert rows["carol"]["status"] == "error: no repository (expected lab-carol)"
    assert not (out.parent / "grades-code" / "mallory").exists()
    lines = scores.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4, lines  # one line a student: her name's line break is not a new row
    assert next(csv.reader(lines[2:3]))[:2] == ["mallory", "'=HYPERLINK(\"http://x\") @x"]  # text, not a formula
