"""What a Windows Python lacks, by the standard library's type stubs (typeshed, shipped inside mypy), for the names
the grader's source uses: the list the no-fork stand-in (standins/attnlab_nofork.py) takes away.

A stub says where a name exists with `if sys.platform ...:` blocks; each is evaluated for "win32" (==, !=,
`.startswith`, `in`, and/or/not, else-branches; any other condition, such as a version check, may hold). A name is
lacking when no definition of it is reachable on win32; a module whose every name lacks is itself lacking. Only
what the grader's own source names is listed (`os.X`, `from os import X`, `hasattr(os, "X")`, `getattr(os, "X", d)`),
so the standard library's own modules, which the stand-in leaves alone, keep working.
"""
from __future__ import annotations

import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parents[2] / "grader"
PLATFORM = "win32"


def typeshed_stdlib() -> Path:
    """typeshed's stdlib folder, as the installed mypy ships it."""
    import mypy

    return Path(mypy.__file__).parent / "typeshed" / "stdlib"


def _is_platform(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "platform" and isinstance(node.value, ast.Name)
            and node.value.id == "sys")


def _strings(node: ast.expr) -> list[str] | None:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and all(isinstance(e, ast.Constant) for e in node.elts):
        return [e.value for e in node.elts]  # type: ignore[attr-defined]
    return None


def holds(test: ast.expr, platform: str = PLATFORM) -> bool | None:
    """Whether a stub's condition holds on `platform`; None where it does not depend on the platform alone."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = holds(test.operand, platform)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [holds(v, platform) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in values else (None if None in values else True)
        return True if True in values else (None if None in values else False)
    if (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "startswith"
            and _is_platform(test.func.value) and len(test.args) == 1 and isinstance(test.args[0], ast.Constant)):
        return platform.startswith(test.args[0].value)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and _is_platform(test.left):
        op, right = test.ops[0], test.comparators[0]
        if isinstance(op, (ast.Eq, ast.NotEq)) and isinstance(right, ast.Constant):
            return (platform == right.value) == isinstance(op, ast.Eq)
        if isinstance(op, (ast.In, ast.NotIn)) and _strings(right) is not None:
            return (platform in _strings(right)) == isinstance(op, ast.In)
    return None


def _defined(node: ast.stmt) -> list[str]:
    """The names a stub statement defines (an import defines one only as a re-export: `import a as a`)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname for a in node.names if a.asname and a.asname == a.name.rpartition(".")[2]]
    if hasattr(ast, "TypeAlias") and isinstance(node, ast.TypeAlias):
        return [node.name.id]
    return []


def _walk(body: list[ast.stmt], reachable: bool, out: dict[str, bool]) -> None:
    for node in body:
        if isinstance(node, ast.If):
            cond = holds(node.test)
            _walk(node.body, reachable and cond is not False, out)
            _walk(node.orelse, reachable and cond is not True, out)
            continue
        if isinstance(node, ast.Try):
            for part in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                _walk(part, reachable, out)
            continue
        for name in _defined(node):
            out[name] = out.get(name, False) or reachable


def stub(module: str, stdlib: Path | None = None) -> Path | None:
    """The stub of a standard library module, or None where typeshed has none."""
    base = (stdlib or typeshed_stdlib()).joinpath(*module.split("."))
    for path in (base.with_suffix(".pyi"), base / "__init__.pyi"):
        if path.is_file():
            return path
    return None


def reachable_names(module: str, stdlib: Path | None = None) -> dict[str, bool]:
    """{name the stub defines: whether a definition of it is reachable on win32}."""
    path = stub(module, stdlib)
    if path is None:
        return {}
    out: dict[str, bool] = {}
    _walk(ast.parse(path.read_text(encoding="utf-8")).body, True, out)
    return out


def grader_uses(root: Path = GRADER) -> dict[str, set[str]]:
    """{standard module: the names of it the grader's source uses}, found with ast in grader/**/*.py."""
    used: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if "templates" in path.relative_to(root).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        aliases: dict[str, str] = {}  # the local name a module is bound to -> the module
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    aliases[a.asname or a.name.partition(".")[0]] = a.name if a.asname else a.name.partition(".")[0]
                    used.setdefault(a.name, set())
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                used.setdefault(node.module, set()).update(a.name for a in node.names)
                for a in node.names:  # `from grader.core.host import resource`: a module passed on by name
                    aliases.setdefault(a.asname or a.name, a.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                holder = node.value
                name = (holder.id if isinstance(holder, ast.Name) else holder.attr
                        if isinstance(holder, ast.Attribute) else None)  # `host.resource.setrlimit` too
                if name is not None:
                    used.setdefault(aliases.get(name, name), set()).add(node.attr)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr")
                  and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and isinstance(node.args[1], ast.Constant)
                  and isinstance(node.args[1].value, str)):
                used.setdefault(aliases.get(node.args[0].id, node.args[0].id), set()).add(node.args[1].value)
    return used


def win32_lacks(root: Path = GRADER, stdlib: Path | None = None) -> dict[str, list[str] | None]:
    """{standard module: the names the grader uses that win32 lacks, or None where the module itself is lacking}."""
    lacks: dict[str, list[str] | None] = {}
    for module, names in sorted(grader_uses(root).items()):
        if stub(module, stdlib) is None:
            continue
        defined = reachable_names(module, stdlib)
        if defined and not any(defined.values()):
            lacks[module] = None
            continue
        gone = sorted(n for n in names if n in defined and not defined[n])
        if gone:
            lacks[module] = gone
    return lacks


STANDIN = Path(__file__).parent / "standins" / "attnlab_nofork.py"
_MARK = "  # the stubs' account"


def standin_lacks(text: str | None = None) -> dict[str, list[str] | None]:
    """The LACKS the stand-in holds."""
    line = next(ln for ln in (text or STANDIN.read_text(encoding="utf-8")).splitlines() if ln.endswith(_MARK))
    return ast.literal_eval(line.partition("=")[2].removesuffix(_MARK).strip())


def write_standin() -> None:
    """Put the stubs' account into the stand-in (its LACKS line)."""
    lines = STANDIN.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if ln.rstrip("\n").endswith(_MARK))
    lines[at] = f"LACKS = {win32_lacks()!r}{_MARK}\n"
    STANDIN.write_text("".join(lines), encoding="utf-8")


if __name__ == "__main__":
    import json
    import sys

    if sys.argv[1:] == ["--write"]:
        write_standin()
    print(json.dumps(win32_lacks(), indent=1))
