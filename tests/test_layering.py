"""The grader's trust layers hold: read from the source with `ast`, every import counted, at any depth.

Bottom to top: grader/worker/ < grader/judge/ (with grader/cases/ and grader/public/) < grader/runner/ <
grader/verbs/; beside them grader/lab/, grader/lesson/, grader/regrade/, grader/plots/, and the command line on top.
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
    """The folder of grader/ a module lives in (`grader.judge.plugin` → `judge`); "" for grader/*.py."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (GRADER / parts[1]).is_dir() else ""


def _edges_into(source_floors: set[str], banned_floors: set[str]) -> list[str]:
    return sorted(f"{source} -> {target}" for source, targets in GRAPH.items() if _floor(source) in source_floors
                  for target in targets if _floor(target) in banned_floors)


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
    bad = _edges_into({"worker"}, {"judge", "runner", "verbs", "lesson", "regrade", "plots"})
    assert not bad, "worker/ reaches up:\n" + "\n".join(bad)


def test_the_worker_imports_no_module_of_the_lab_which_a_worker_is_only_ever_sent_as_source():
    """docs/threat-model.md: a worker holds the lab modules its piece is given (the judge sends their source) and no
    other; a lab module imported from disk would sit in every worker, its answers with it."""
    bad = _edges_into({"worker"}, {"lab"})
    assert not bad, "worker/ imports the lab (the judge sends what a piece needs):\n" + "\n".join(bad)


def test_the_judge_imports_nothing_from_the_runner_the_verbs_or_the_modules_beside_them():
    bad = _edges_into({"judge"}, {"runner", "verbs", "lesson", "regrade", "plots"})
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
