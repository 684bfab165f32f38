"""The supervisor of one extension (zotd/runtime/extension.py) on its own,
against a stub host and in-memory fake processes, in virtual time."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import trio
import trio.testing

from tests.fakes import FakeIO, FakeSpawner
from zotd.model.config import Config
from zotd.model.manifest import Found
from zotd.protocol import extension as ep
from zotd.runtime.extension import RUNNING, Extension, State
from zotd.runtime.extension_log import ExtensionLog


class StubHost:
    """A workspace that records what it is told."""

    def __init__(self) -> None:
        self.told: list[str] = []

    def hello_ack(self, ext: Extension) -> ep.HelloAck:
        return ep.HelloAck(protocol_version=1, zot_version="0", provider="", model="", cwd="/")

    def on_register_command(self, ext: Extension, frame: ep.RegisterCommand) -> str | None:
        self.told.append(f"command {frame.name}")
        return None

    def on_register_tool(self, ext: Extension, frame: ep.RegisterTool) -> str | None:
        self.told.append(f"tool {frame.name}")
        return None

    def on_notify(self, ext: Extension, frame: ep.Notify) -> None:
        self.told.append(f"notify {frame.message}")

    def on_panel(self, ext: Extension, frame: ep.PanelRender | ep.PanelClose) -> None:
        self.told.append("panel")

    def on_reregister(self, ext: Extension) -> None:
        pass

    def on_changed(self, ext: Extension) -> None:
        self.told.append(f"changed {ext.state}")

    def on_host_call(self, ext: Extension, frame: ep.CallToolRequest | ep.CallToolCancel) -> None:
        self.told.append("host call")

    def on_one_way(self, ext: Extension, frame: ep.OneWay) -> None:
        self.told.append("one way")

    def on_exit(self, ext: Extension) -> None:
        self.told.append(f"exit {ext.state}")


def extension(tmp_path: Path, spawner: FakeSpawner, host: StubHost) -> Extension:
    found = Found(name="x", dir=tmp_path, scope="global", argv=["x", "--name", "x"])
    return Extension(
        found,
        host=host,
        config=Config(),
        log_path=tmp_path / "ext-x.log",
        spawner=spawner,
        env={},
    )


def test_states_keep_their_wire_values() -> None:
    assert [str(s) for s in State] == [
        "starting",
        "ready",
        "stopping",
        "untrusted",
        "restarting",
        "sleeping",
        "exited",
        "failed",
        "disabled",
    ]
    state: State = State.READY
    assert state == "ready"  # as older code and the CLIs compare it
    assert f"{State.FAILED}" == "failed"
    assert msgspec.json.encode({"state": State.STOPPING}) == b'{"state":"stopping"}'
    assert frozenset({"starting", "ready"}) == RUNNING


async def test_a_stop_while_its_log_rotates_starts_nothing(
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = trio.Event()

    async def slow_rotation(self: ExtensionLog) -> bool:  # as a big log's copy in a thread
        await gate.wait()
        return True

    monkeypatch.setattr(ExtensionLog, "rotate", slow_rotation)

    spawner = FakeSpawner(nursery, {})
    host = StubHost()
    ext = extension(tmp_path, spawner, host)
    nursery.start_soon(ext.run)
    await trio.testing.wait_all_tasks_blocked()
    await ext.stop()  # returns at once: there is no process to stop
    gate.set()
    await ext.finished.wait()
    assert spawner.spawns == []
    assert ext.state == State.EXITED
    assert host.told == ["exit exited"]


async def test_a_refused_extension_is_heard_no_more(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    async def rude(io: FakeIO) -> None:
        await io.send(type="register_tool", name="t", schema={"type": "object"})
        await io.send(type="notify", message="still here")
        await trio.sleep_forever()

    spawner = FakeSpawner(nursery, {"x": rude})
    host = StubHost()
    ext = extension(tmp_path, spawner, host)
    await ext.run()
    assert ext.state == State.FAILED
    assert ext.last_error == "refused: first frame must be `hello`, got `register_tool`"
    assert ext.ended_on_its_own() is None  # a refusal is no crash to restart from
    assert host.told == ["changed starting", "exit failed"]  # no tool, no notify
    assert "still here" not in ext.log_path.read_text()


async def test_hello_brings_the_quiet_window_nearer(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    # Waiting for `hello` until the grace (3 s), it says hello at once: ready
    # 0.2 s of quiet later, not at the grace.
    async def quick(io: FakeIO) -> None:
        await trio.sleep(0.5)
        await io.hello("x", ready=False, commands=["c"])
        async for _ in io.frames():
            pass

    spawner = FakeSpawner(nursery, {"x": quick})
    host = StubHost()
    ext = extension(tmp_path, spawner, host)
    start = trio.current_time()
    nursery.start_soon(ext.run)
    await ext.settled.wait()
    assert trio.current_time() - start == pytest.approx(0.7)
    assert ext.state == State.READY
    assert host.told == ["changed starting", "command c", "changed ready"]
    assert "no `ready` frame; ready after 0.2 s of quiet" in ext.log_path.read_text()
    await ext.stop()
