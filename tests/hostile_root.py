"""The hostile files a student can put at a repository's root, each leaving a marker if anything loads it: used by
every route that grades a checkout of the student's repository (the per-push workflow, Classroom 50)."""
from __future__ import annotations

from pathlib import Path

# each file, imported or run anywhere, leaves a marker named after itself
_MARKER = "import os as _os; open(_os.path.join({marks!r}, {name!r}), 'w').write(repr(_os.environ.get('ATTNLAB_SEAL_KEY')))\n"
_FORGE = '''
import pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
'''
_ADDOPTS = "-p evil_plugin"
_SHADOWS = ("torch", "numpy", "click", "yaml", "tqdm", "pytest_timeout", "cryptography", "nbformat", "pluggy")


def plant(repo: Path, marks: Path) -> list[str]:
    """Write the hostile files at the repository's root; returns the names of the markers they would leave."""
    def code(name: str) -> str:
        return _MARKER.format(marks=str(marks), name=name)

    files = {
        "setup.py": code("setup.py") + "from setuptools import setup\nsetup(name='x')\n",
        "sitecustomize.py": code("sitecustomize.py") + "_os.environ['PYTEST_PLUGINS'] = 'evil_plugin'\n",
        "usercustomize.py": code("usercustomize.py"),
        "evil_plugin.py": code("evil_plugin.py") + _FORGE,
        "conftest.py": code("conftest.py") + _FORGE,
        "attnlab_evil.pth": "import evil_plugin\n",
        "pytest.ini": f"[pytest]\naddopts = {_ADDOPTS}\n",
        "tox.ini": f"[pytest]\naddopts = {_ADDOPTS}\n",
        "setup.cfg": f"[tool:pytest]\naddopts = {_ADDOPTS}\n",
        "pyproject.toml": f"[build-system]\nrequires = []\nbuild-backend = 'evil_backend'\nbackend-path = ['.']\n"
                          f"[tool.pytest.ini_options]\naddopts = '{_ADDOPTS}'\n",
        "evil_backend.py": code("evil_backend.py"),
        **{f"{m}.py": code(f"{m}.py") + "raise ImportError('a shadow')\n" for m in _SHADOWS},
    }
    for name, text in files.items():
        (repo / name).write_text(text)
    (repo / "exercises" / "conftest.py").write_text(code("exercises/conftest.py") + _FORGE)
    # packages that `python -m pip` (and pip itself) would import from the working directory if it were on sys.path
    packages = {"pip": ("__init__.py", "__main__.py"), "json": ("__init__.py",), "logging": ("__init__.py",)}
    for name, modules in packages.items():
        (repo / name).mkdir()
        for module in modules:
            (repo / name / module).write_text(code(f"{name}/{module}") + "raise SystemExit('a shadow')\n")
    return ([n for n in files if n.endswith(".py")] + ["exercises/conftest.py"]
            + [f"{n}/{m}" for n, ms in packages.items() for m in ms])
