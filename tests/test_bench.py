"""The benchmark scripts (bench/) keep up with the grader: each loads by path and every name it imports from the
grader, at its top or inside a function, exists; bench.py's sections run, its cheapest mode (--steps-only) to its
end in the full suite (issue 49: a rename broke it and nothing ran it); bench/record.py's test counts are pytest's
own."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader import ROOT

BENCH = ROOT / "bench"

# Run in a child: the scripts put bench/ and the checkout first on sys.path, and two of them share a name with a
# tests/ package (regrade), so each script is loaded with the path it starts with and its siblings forgotten.
CHECK = textwrap.dedent('''
    import ast, importlib, importlib.util, inspect, json, sys
    from pathlib import Path

    paths = [Path(p) for p in sys.argv[1:]]
    start, stale = list(sys.path), []
    for path in paths:
        sys.path[:] = [str(path.parent), *start]  # as `python bench/X.py` starts: its own folder first
        for name in [n for n in sys.modules if n in {p.stem for p in paths} or n.startswith("attnlab_bench_")]:
            del sys.modules[name]
        spec = importlib.util.spec_from_file_location(f"attnlab_bench_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        bound = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                try:
                    source = importlib.import_module(node.module)
                except ImportError as e:
                    stale.append(f"{path.name}:{node.lineno}: {node.module} ({e})")
                    continue
                for alias in node.names:
                    try:
                        value = getattr(source, alias.name) if hasattr(source, alias.name) else \\
                            importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        stale.append(f"{path.name}:{node.lineno}: {node.module}.{alias.name}")
                        continue
                    if node.module.split(".")[0] == "grader":
                        bound[alias.asname or alias.name] = value
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            # an attribute of a grader module the script imported: grader.verbs.batch's main, train.WARM_STEP
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \\
                    inspect.ismodule(bound.get(node.value.id)) and not hasattr(bound[node.value.id], node.attr):
                stale.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr}")
            # a call by keyword to a grader function: a renamed parameter
            if isinstance(node, ast.Call) and not any(k.arg is None for k in node.keywords) and \\
                    not any(isinstance(a, ast.Starred) for a in node.args):
                f = node.func
                fn = bound.get(f.id) if isinstance(f, ast.Name) else getattr(bound.get(f.value.id), f.attr, None) \\
                    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
                if not callable(fn):
                    continue
                try:
                    inspect.signature(fn).bind(*node.args, **{k.arg: None for k in node.keywords})
                except TypeError as e:
                    stale.append(f"{path.name}:{node.lineno}: {ast.unparse(f)}(...): {e}")
                except ValueError:  # not a function, or one without a signature
                    pass
    print(json.dumps(stale))
''')


def stale_names(paths: list[Path]) -> list[str]:
    """What the scripts at `paths` import, read or call by keyword from the grader that is not there."""
    done = subprocess.run([sys.executable, "-c", CHECK, *map(str, paths)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def load_bench():
    """bench/bench.py, loaded by path as tests/platforms/test_platforms.py loads bench/gpu.py."""
    spec = importlib.util.spec_from_file_location("attnlab_bench_bench", BENCH / "bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_bench_script_loads_and_every_grader_name_it_uses_exists():
    scripts = sorted(BENCH.glob("*.py"))
    assert {"bench.py", "record.py", "gpu.py"} <= {p.name for p in scripts}
    assert stale_names(scripts) == []


def test_a_name_imported_inside_a_function_after_a_rename_is_caught(tmp_path):
    script = tmp_path / "renamed.py"
    script.write_text(textwrap.dedent('''
        from grader.lab import train


        def worker_start():
            from grader.judge.remote import PieceWorker, Submission  # Submission became CaseHandle
            return train.NOT_A_NAME, train.train(model=None, cfg=None, gone=1)
    '''))
    found = stale_names([script])
    assert [f.split(": ", 1)[1] for f in found] == ["grader.judge.remote.Submission", "train.NOT_A_NAME",
                                                    f"train.train(...): {_bind_error()}"]


def _bind_error() -> str:
    """The message inspect gives for train.train called with a parameter it lacks, as the check quotes it."""
    import inspect

    from grader.lab import train

    try:
        inspect.signature(train.train).bind(model=None, cfg=None, gone=None)
    except TypeError as e:
        return str(e)
    raise AssertionError("train.train took a parameter named gone")


def test_bench_times_each_models_step_and_each_attention_at_a_small_size():
    bench = load_bench()
    calibration = bench.calibration(repeats=2)
    steps = bench.step_seconds(repeats=1, steps=1)
    attention = bench.attention_seconds(repeats=1, sentences=1, steps=2)
    flops = bench.step_flops(calibration["mm256_us"])
    assert set(steps) == set(bench.models()) and set(attention) == {"Bahdanau", "Luong"}
    assert all(v > 0 for v in [*steps.values(), *attention.values(), flops["mflop"], flops["floor_ms"]])


# 17 s on the quiet dev machine, 64 s at load average 10 there, and a runner pays about 3x: the full suite runs it
@pytest.mark.slow
def test_bench_steps_only_runs_to_its_end_and_writes_every_models_step_cost(tmp_path):
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(BENCH / "bench.py"), "--steps-only", "--json", str(out)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("calibration: ")
    figures = json.loads(out.read_text())
    assert set(figures["step_seconds"]) == set(load_bench().models())
    assert all(v > 0 for v in [*figures["step_seconds"].values(), *figures["attention_seconds"].values()])


def test_bench_starts_a_jailed_worker_loads_a_piece_and_closes_it():
    figures = load_bench().worker_start(n=2)
    assert 0 < figures["seconds"] < 60 and isinstance(figures["missing"], list)


def load_record():
    """bench/record.py, loaded by path."""
    spec = importlib.util.spec_from_file_location("attnlab_bench_record", BENCH / "record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_record_counts_the_tests_pytest_collects_under_each_marker(tmp_path):
    fast, slow = 4, 3
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    (tmp_path / "test_some.py").write_text(
        "import pytest\n\n\n@pytest.mark.parametrize('n', range(%d))\ndef test_fast(n):\n    pass\n\n\n"
        "@pytest.mark.slow\n@pytest.mark.parametrize('n', range(%d))\ndef test_slow(n):\n    pass\n" % (fast, slow))
    record = load_record()
    assert record.collected(record.COLLECTED["fast_tests_collected"], tmp_path) == fast
    assert record.collected(record.COLLECTED["slow_tests_collected"], tmp_path) == slow


def test_the_record_refuses_a_count_from_a_collection_that_failed(tmp_path):
    (tmp_path / "test_broken.py").write_text("import not_a_module_anywhere\n\n\ndef test_one():\n    pass\n")
    with pytest.raises(SystemExit, match="not_a_module_anywhere"):
        load_record().collected("not slow", tmp_path)
