"""A worker's commands are one table (grader/worker/runtime.py COMMANDS, filled by @command): a command added there
alone is answered, and one nobody added is refused. The worker runs here in-process, over a socket pair."""
from __future__ import annotations

import socket
import threading

import pytest
import torch

from grader.worker import runtime, wire


@pytest.fixture
def worker(monkeypatch):
    """A channel to a Worker serving in a thread; the table is this test's copy, so what it adds goes with it."""
    monkeypatch.setattr(runtime, "COMMANDS", dict(runtime.COMMANDS))
    ours, theirs = socket.socketpair()
    served = threading.Thread(target=runtime.Worker(theirs.fileno()).serve, daemon=True)
    served.start()

    def ask(req: dict) -> dict:
        wire.send(ours.fileno(), req)
        return wire.recv(ours.fileno(), trusted=True)

    yield ask
    ours.close()
    served.join(timeout=10)
    theirs.close()


def test_a_command_added_with_the_decorator_alone_is_answered(worker):
    @runtime.command("double")
    def double(self: runtime.Worker, req: dict) -> torch.Tensor:
        return wire.decode(req["x"]) * 2

    reply = worker({"cmd": "double", "x": wire.encode(torch.arange(3.0))})
    assert reply["ok"], reply
    torch.testing.assert_close(wire.decode(reply["value"]), torch.tensor([0.0, 2.0, 4.0]))


def test_a_command_nobody_added_is_refused_with_its_name(worker):
    reply = worker({"cmd": "double"})
    assert not reply["ok"] and "unknown command 'double'" in reply["error"]["message"]


def test_every_command_the_grader_sends_is_in_the_table():
    """The requests the grader writes (the judge's, the cases', the plots') name only commands the worker has."""
    import re

    from grader import ROOT

    sent = {cmd for path in (ROOT / "grader").rglob("*.py")
            for cmd in re.findall(r'"cmd": "(\w+)"', path.read_text(encoding="utf-8"))}
    assert len(sent) > 10 and sent <= set(runtime.COMMANDS), sorted(sent - set(runtime.COMMANDS))
