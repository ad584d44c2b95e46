"""The files of a student release that the lab generates, made afresh from their sources for every release.

An instructor's working tree may hold other versions of them: an exercises/additive.py they solved to try their own
solution, a lesson.ipynb run with its outputs, a case manifest not rebuilt after a case changed, a split edited by
hand. A release never ships those. `generated()` is what `grade stubs` (exercises/ and grader/core/piece_facts.json from
reference/), `grade manifest`
(the hidden cases' and the public checks' manifests) and `grade data` (the toy task's splits) would write, and
`unshipped()` names the working tree's versions that differ from it, in one line for the instructor.
"""
from __future__ import annotations

import hashlib
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

EXERCISES = "exercises/"
MANIFESTS = {"grader/cases/manifest.json": "cases", "grader/public/manifest.json": "public"}


class GenerateError(Exception):
    """A generated file could not be made; str() is one line: which, and what to do."""


def exercises() -> dict[str, bytes]:
    """What `grade stubs` writes from reference/: exercises/ (the stubs, the package marker and lesson.ipynb) and
    the pieces' facts (grader/core/piece_facts.json)."""
    from grader import ROOT
    from grader.core import pieces
    from grader.lesson import ipynb, notebook, stubs

    files = {f"{EXERCISES}{path.name}": text.encode("utf-8") for path, text in stubs.expected().items()}
    files[pieces.FACTS.relative_to(ROOT).as_posix()] = stubs.facts().encode("utf-8")
    try:
        files[f"{EXERCISES}{notebook.NOTEBOOK.name}"] = notebook.dumps(notebook.build("stubs")).encode("utf-8")
    except ipynb.NotebookError as e:
        raise GenerateError(f"exercises/lesson.ipynb cannot be built: {e}") from None
    return files


def manifest(rel: str) -> bytes:
    """The manifest at `rel` (MANIFESTS), as `grade manifest` collects it from the cases beside it."""
    from grader import ROOT
    from grader.runner import manifest as collecting

    with tempfile.TemporaryDirectory(prefix="attnlab-manifest-") as tmp:
        out = Path(tmp) / "manifest.json"
        try:
            collecting.collect(out, ROOT / Path(rel).parent)
        except RuntimeError as e:
            last = (str(e).strip().splitlines() or ["no output"])[-1][:200]
            raise GenerateError(f"{rel} cannot be rebuilt: collecting its cases failed ({last})") from None
        return out.read_bytes()


def splits() -> dict[str, bytes]:
    """The toy task's splits as `grade data` writes them, each checked against the digest the grader accepts."""
    from grader import ROOT
    from grader.core import datasets
    from grader.lab import toy

    files = {}
    for split in toy.SPLITS:
        data = "".join(f"{' '.join(s)}\t{' '.join(t)}\n" for s, t in toy.generate(split)).encode("utf-8")
        rel = toy.split_path(split).relative_to(ROOT).as_posix()
        if hashlib.sha256(data).hexdigest() != datasets.DIGESTS[split]:
            raise GenerateError(f"the generator makes a {rel} whose SHA-256 is not the one grader/core/datasets.py "
                                "accepts: run `grade data` and put the checksums it prints in grader/core/datasets.py")
        files[rel] = data
    return files


def generated() -> dict[str, bytes]:
    """Every generated file a student release ships, by its path in the release: exercises/, the two manifests and the
    splits. The manifests are collected by pytest in two processes, side by side with the rest."""
    with ThreadPoolExecutor(max_workers=len(MANIFESTS)) as pool:
        collected = {rel: pool.submit(manifest, rel) for rel in MANIFESTS}
        files = {**exercises(), **splits()}
        files.update({rel: job.result() for rel, job in collected.items()})
    return files


def _same(path: Path, data: bytes) -> bool:
    """Whether the working tree's `path` holds `data` (line ends aside: git may check text out with CRLF)."""
    try:
        return path.is_file() and path.read_bytes().replace(b"\r\n", b"\n") == data.replace(b"\r\n", b"\n")
    except OSError:
        return False


def unshipped(files: dict[str, bytes], root: Path, tracked: list[str]) -> str:
    """One line naming the working tree's generated files (and any other tracked file of exercises/) that the release
    does not ship as they are here, or "" when there is none."""
    differ = [rel for rel, data in sorted(files.items()) if not _same(root / rel, data)]
    extra = [rel for rel in tracked if rel.startswith(EXERCISES) and rel not in files]
    if not differ and not extra:
        return ""
    said = ("note: the release ships its generated files as reference/, the cases and the data generator make them "
            "(`grade stubs`, `grade manifest`, `grade data`), not as this working tree has them: "
            f"{', '.join(differ)} differ here, and those edits are not in the release" if differ else "note:")
    if extra:
        said += ("; " if differ else " ") + f"{', '.join(extra)} {'is' if len(extra) == 1 else 'are'} not generated " \
                "and not shipped (exercises/ holds only what reference/ generates)"
    return said
