"""The no-fork stand-in's list is the standard library stubs' account of what win32 lacks, not a list of our own."""
from __future__ import annotations

import ast

import pytest

from .stubs_account import grader_uses, holds, reachable_names, standin_lacks, win32_lacks


@pytest.fixture(scope="module")
def lacks() -> dict[str, list[str] | None]:
    return win32_lacks()


def test_the_list_holds_what_the_stubs_say_windows_lacks_of_what_the_grader_uses(lacks):
    assert {"O_NOFOLLOW", "O_NONBLOCK", "getpgid", "killpg", "fork"} <= set(lacks["os"])
    assert {"SIGKILL", "SIGALRM"} <= set(lacks["signal"])
    assert {"send_fds", "recv_fds"} <= set(lacks["socket"])
    assert lacks["resource"] is None  # every name in resource.pyi is under `sys.platform != "win32"`


def test_the_list_keeps_what_windows_has_and_what_the_grader_does_not_use(lacks):
    assert not {"O_RDONLY", "O_BINARY", "getpid", "kill", "open", "name"} & set(lacks["os"])
    assert not {"SIGTERM", "SIGINT", "signal"} & set(lacks["signal"])
    assert "forkpty" not in lacks["os"]  # lacking on Windows, but the grader never names it
    assert "fcntl" not in lacks and "posix" not in lacks  # the standard library's own imports keep working


def test_the_stand_in_holds_the_stubs_account_as_it_is_now(lacks):
    assert standin_lacks() == lacks, "run `python tests/platforms/stubs_account.py --write`"


def test_the_grader_names_what_it_probes_for_with_hasattr_and_getattr():
    uses = grader_uses()
    assert {"O_NOFOLLOW", "O_NONBLOCK", "getpgid", "fork"} <= uses["os"]  # getattr(os, "O_NOFOLLOW", 0) counts
    assert "SIGALRM" in uses["signal"]


@pytest.mark.parametrize(("condition", "on_win32"), [
    ('sys.platform == "win32"', True),
    ('sys.platform != "win32"', False),
    ('sys.platform == "linux"', False),
    ('sys.platform.startswith("win")', True),
    ('sys.platform.startswith("linux")', False),
    ('sys.platform in ("linux", "darwin")', False),
    ('sys.platform not in ("linux", "darwin")', True),
    ('sys.platform != "win32" and sys.version_info >= (3, 12)', False),
    ('sys.platform == "win32" or sys.version_info >= (3, 12)', True),
    ('sys.platform != "linux" and sys.platform != "darwin"', True),
    ('not sys.platform.startswith("win")', False),
    ("sys.version_info >= (3, 12)", None),
])
def test_a_stubs_platform_condition_is_evaluated_for_win32(condition, on_win32):
    assert holds(ast.parse(condition, mode="eval").body) is on_win32


def test_a_name_defined_on_another_branch_for_win32_is_not_lacking(tmp_path):
    (tmp_path / "m.pyi").write_text(
        "import sys\n"
        "if sys.platform == 'win32':\n    def both() -> None: ...\n"
        "else:\n    def both() -> None: ...\n    def posix_only() -> None: ...\n"
        "if sys.platform != 'win32':\n    if sys.version_info >= (3, 12):\n        NEWER: int\n"
        "elif sys.version_info >= (3, 11):\n    WIN_NEWER: int\n")
    assert reachable_names("m", tmp_path) == {"both": True, "posix_only": False, "NEWER": False, "WIN_NEWER": True}
