"""The grader's trust layers hold: read from the source with `ast`, every import counted, at any depth.

Bottom to top: grader/core/ < grader/worker/ < grader/judge/ (with grader/cases/ and grader/public/) <
grader/runner/ < grader/verbs/ < grader/cli/; beside them grader/lab/, grader/lesson/, grader/regrade/,
grader/plots/ and grader/release/; at grader/'s root only the package's face and its entry points. FLOORS below
names every floor and what it may import.
Issue 30 lays down the rules each test below checks; an import inside a function counts the same as one at the
top of the module (the lab imports lazily a lot), and so does a relative one.
"""
from __future__ import annotations

import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parents[1] / "grader"

# A module this long has more than one job: split it. These were longer than the limit when the rule came in; each
# count is a ceiling that may only shrink (lower it when the module shrinks, drop the entry when it fits).
MAX_LINES = 400
OVER_THE_LIMIT: dict[str, int] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(GRADER.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(GRADER.rglob("*.py")) if "__pycache__" not in path.parts}


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The grader module `name` names: itself, or the longest package or module above it (`grader.a.b.f` → `grader.a.b`)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str) -> set[str]:
    """Every grader module `module` imports, anywhere in it, absolute or relative."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [_resolve(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            # `from p import m` names the submodule p.m when there is one, else a name p defines
            targets = [_resolve(f"{stem}.{alias.name}") for alias in node.names]
        else:
            continue
        found.update(target for target in targets if target is not None and target != module)
    return found


GRAPH = {module: _imports(module) for module in MODULES}


def _floor(module: str) -> str:
    """The folder of grader/ a module lives in (`grader.judge.plugin` → `judge`); "" for grader/*.py (the package's
    face, grader/__init__.py, and its entry points)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (GRADER / parts[1]).is_dir() else ""


def _edges_into(source_floors: set[str], banned_floors: set[str]) -> list[str]:
    return sorted(f"{source} -> {target}" for source, targets in GRAPH.items() if _floor(source) in source_floors
                  for target in targets if _floor(target) in banned_floors)


# Every floor of grader/, bottom to top, with the floors it may import (each may import itself, and the package's face,
# grader/__init__.py, for its paths). The worker, below the judge, is what runs student code: it may use only the
# ground floor; the judge and its cases may use the worker's side (to talk to it) and the lab; the command line is
# the top, and only the entry points at grader/'s root (boot.py, workflow.py, __main__.py) stand above it.
FLOORS: dict[str, set[str]] = {
    "core": set(),  # the registry, child processes and their environment, untrusted files, the data, the record
    "worker": {"core"},  # the untrusted side: the jail, the request loop, the wire
    "lab": {"core"},  # the lab's model code: sent to workers as source, imported by judges and the parent
    "judge": {"core", "worker", "lab"},  # the trusted judge: the pytest plugin, verdicts, the handles on workers
    "cases": {"core", "worker", "judge", "lab"},  # the hidden cases, run by a judge
    "public": {"core", "worker", "judge"},  # the public checks, run by a judge
    "runner": {"core", "worker", "judge", "lab"},  # the parent's machinery: staging, scheduling, the reports
    "lesson": {"core", "judge", "lab", "runner"},  # stubs, the notebook, its check()
    "plots": {"core", "worker", "judge", "lab", "runner"},  # grade --plots: trains in jailed workers, draws here
    "regrade": {"core", "judge", "lab", "lesson", "runner"},  # the class regrade
    "release": {"core", "lab", "lesson", "runner"},  # the student release and its generated files
    "verbs": {"core", "runner", "lesson", "plots", "regrade", "release"},  # one module per command
    "cli": {"core", "worker", "judge", "lab", "lesson", "regrade", "runner", "verbs"},  # click wrappers over the verbs
    "": {"cli", "runner"},  # the package's face and its entry points: boot.py, workflow.py, __main__.py
}
ENTRY_POINTS = {"grader", "grader.__main__", "grader.boot", "grader.workflow"}


def test_every_folder_of_the_grader_is_a_floor_and_its_root_holds_only_the_face_and_the_entry_points():
    folders = {p.parent.relative_to(GRADER).parts[0] for p in GRADER.rglob("*.py")
               if p.parent != GRADER and "templates" not in p.parts}
    assert folders == set(FLOORS) - {""}, f"folders that are no floor: {sorted(folders - set(FLOORS))}"
    assert {m for m in MODULES if _floor(m) == ""} == ENTRY_POINTS


def test_each_floor_imports_only_the_floors_it_may():
    bad = sorted(f"{source} -> {target}" for source, targets in GRAPH.items() for target in targets
                 if _floor(target) != _floor(source) and target != "grader"
                 and _floor(target) not in FLOORS[_floor(source)])
    assert not bad, "imports across floors that the table does not allow:\n" + "\n".join(bad)


def test_every_import_of_the_grader_names_a_module_or_a_name_its_package_defines():
    """A stale path (`from grader import pieces` after pieces.py moved to grader/core/) resolves to the package
    above it in the graph, so the floor rules above would pass it: it is caught here."""
    faces = {module: {n.id for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Name)}
             | {n.name for n in ast.parse(path.read_text()).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
             for module, path in MODULES.items() if path.name == "__init__.py"}
    stale = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("grader"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if full not in MODULES and node.module in faces and alias.name not in faces[node.module]:
                        stale.append(f"{module}: from {node.module} import {alias.name}")
            elif isinstance(node, ast.Import):
                stale += [f"{module}: import {a.name}" for a in node.names
                          if a.name.startswith("grader.") and a.name not in MODULES]
    assert not stale, "imports of nothing the grader has:\n" + "\n".join(stale)


def test_the_parser_sees_the_imports_the_grader_is_known_to_make():
    assert "grader.worker.wire" in MODULES and "grader.judge.plugin" in MODULES
    assert any(targets for targets in GRAPH.values())
    assert all(target in MODULES for targets in GRAPH.values() for target in targets)


def test_no_module_of_the_grader_imports_itself_back_through_a_cycle():
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path now, 2: finished
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(GRAPH[module]):
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_worker_imports_nothing_from_the_floors_above_it_or_beside_it():
    bad = _edges_into({"worker"}, {"judge", "runner", "verbs", "lesson", "regrade", "plots", "release", "cli"})
    assert not bad, "worker/ reaches up:\n" + "\n".join(bad)


def test_the_worker_imports_no_module_of_the_lab_which_a_worker_is_only_ever_sent_as_source():
    """docs/threat-model.md: a worker holds the lab modules its piece is given (the judge sends their source) and no
    other; a lab module imported from disk would sit in every worker, its answers with it."""
    bad = _edges_into({"worker"}, {"lab"})
    assert not bad, "worker/ imports the lab (the judge sends what a piece needs):\n" + "\n".join(bad)


def test_the_judge_imports_nothing_from_the_runner_the_verbs_or_the_modules_beside_them():
    bad = _edges_into({"judge"}, {"runner", "verbs", "lesson", "regrade", "plots", "release", "cli"})
    assert not bad, "judge/ reaches up:\n" + "\n".join(bad)


def test_the_regrade_and_the_lesson_import_no_verb():
    bad = _edges_into({"regrade", "lesson"}, {"verbs"})
    assert not bad, "regrade/ or lesson/ import a verb:\n" + "\n".join(bad)


def test_no_verb_imports_another_verb():
    bad = sorted(f"{source} -> {target}" for source, targets in GRAPH.items() if _floor(source) == "verbs"
                 for target in targets if _floor(target) == "verbs" and target != "grader.verbs")
    assert not bad, "verbs/ import each other (move the shared code down a floor):\n" + "\n".join(bad)


def test_no_module_runs_over_four_hundred_lines_and_the_allowed_ones_only_shrink():
    counts = {module: len(path.read_text().splitlines()) for module, path in MODULES.items()}
    over = sorted(f"{module}: {n} lines" for module, n in counts.items()
                  if n > OVER_THE_LIMIT.get(module, MAX_LINES))
    assert not over, f"modules over {MAX_LINES} lines (or over their allowed ceiling):\n" + "\n".join(over)
    stale = sorted(f"{module}: allowed {ceiling}, now {counts.get(module)}" for module, ceiling in OVER_THE_LIMIT.items()
                   if counts.get(module, 0) <= MAX_LINES)
    assert not stale, "drop these from OVER_THE_LIMIT (they fit now):\n" + "\n".join(stale)
