"""The harness's own check: the hostile code it plants is armed."""
from __future__ import annotations

from .harness import KEY_HUNT


def test_the_payload_and_the_key_hunt_do_harm_outside_the_jail(arena, tmp_path, monkeypatch, capsys):
    """The hostile code is armed: run here, unjailed, it writes, spawns, kills and finds the key."""
    ns: dict = {}
    exec(arena.prelude(), ns)  # noqa: S102 - the test's point: the payload armed, outside any jail
    ns["_payload"]()
    arena.sentinel.wait(timeout=5)
    assert {p.name for p in arena.marks.iterdir()} >= {"m.open", "m.osopen", "m.subprocess", "m.system"}
    monkeypatch.setenv("ATTNLAB_SEAL_KEY", "armed")
    exec(KEY_HUNT.replace("_hunt(\"import\")", "_hunt(\"call\")"), {})  # noqa: S102 - as above
    assert "KEY-FOUND" in capsys.readouterr().out
