"""Current zot's ext -> host ``call_tool``, end to end through a real daemon.

The caller, ``tests/extensions/caller.py``, calls tools through the host
from a tool handler (with ``parent_id``) and from a command (without) and
logs every frame it reads; the targets are ``tests/extensions/newer_zot.py``
(its tools ``NAME-hang``, ``NAME-late``, ``weather``, and a guard that logs
what it is asked) and the agent itself, for tools no extension has
(``host_tool_call`` pushes, answered with ``host_tool_result``).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from tests.conftest import EXTENSIONS, FAST, StartDaemon, add_extension, add_newer_zot
from tests.e2e.frame_log import WAIT, frames
from zotd.client import Client, ZotdError, connect
from zotd.model.paths import Paths
from zotd.protocol import agent as ap
from zotd.protocol import extension as ep

CALLER = EXTENSIONS / "caller.py"


def install_caller(paths: Paths, name: str = "caller", *options: str) -> Path:
    """Installs the caller as ``name`` with the relay tool ``<name>-relay``
    (unless ``options`` name others); returns the log of frames it reads."""
    log = paths.home / f"{name}.frames"
    if "--tools" not in options:
        options = (*options, "--tools", f"{name}-relay")
    add_extension(paths.extensions_dir, name, "--log", str(log), *options, script=CALLER)
    return log


def install_target(paths: Paths, name: str = "nz", *options: str) -> Path:
    log = paths.home / f"{name}.frames"
    add_newer_zot(paths.extensions_dir, name, log, *options)
    return log


def results(log: Path) -> dict[str, dict[str, Any]]:
    """The host's ``tool_result`` frames the caller read, by id."""
    return {f["id"]: f for f in frames(log, "tool_result")}


async def wait_until(check: Any) -> None:
    with trio.fail_after(WAIT):
        while not check():
            await trio.sleep(0.01)


def text_of(result: ap.CallData) -> str:
    return "".join(b.text for b in result.content if isinstance(b, ep.TextBlock))


async def relay(zot: Client, tool: str = "caller-relay", **args: Any) -> ap.CallData:
    return await zot.call_tool(tool, args)


async def next_host_call(zot: Client) -> ap.HostToolCallPush:
    with trio.fail_after(WAIT):
        async for frame in zot.notifications():
            if isinstance(frame, ap.HostToolCallPush):
                return frame
    raise AssertionError("the connection closed")


# --- a tool of another extension ------------------------------------------------------


async def test_an_extension_tool_through_the_host(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install_caller(paths)
    install_target(paths)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        result = await relay(zot, name="weather", args={"city": "Oslo"})
    assert (text_of(result), result.is_error) == ("Oslo: sunny", False)
    (ack,) = frames(log, "hello_ack")
    assert ack["capabilities"] == ["call_tool"]
    (reply,) = [r for r in frames(log, "tool_result") if r["id"].endswith("-c")]
    assert reply["name"] == "weather"
    assert reply["content"] == [{"type": "text", "text": "Oslo: sunny"}]
    assert not reply.get("truncated")


async def test_from_a_command_without_parent_id(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install_caller(paths)
    install_target(paths)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        shown = await zot.invoke_command("call", 'weather {"city": "Rome"}')
    reply = json.loads(shown.display)
    assert reply["type"] == "tool_result"
    assert reply["content"] == [{"type": "text", "text": "Rome: sunny"}]
    assert not reply.get("is_error")


async def test_the_guards_are_asked_with_origin_extension(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install_caller(paths)
    guard_log = install_target(paths, "nz", "--intercept", "tool_call", "--block-if", "Mordor")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        allowed = await relay(zot, name="weather", args={"city": "Oslo"})
        blocked = await relay(zot, name="weather", args={"city": "Mordor"})
    assert not allowed.is_error
    assert blocked.is_error
    assert "blocked by nz" in text_of(blocked)
    assert "nz: no 'Mordor'" in text_of(blocked)
    asked = frames(guard_log, "event_intercept")
    assert [f["tool_args"]["city"] for f in asked] == ["Oslo", "Mordor"]
    assert {f["origin_extension"] for f in asked} == {"caller"}
    assert {f["tool_name"] for f in asked} == {"weather"}


async def test_rewritten_args_are_used(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install_caller(paths)
    install_target(paths, "nz", "--intercept", "tool_call", "--set", 'city="Bergen"')
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        result = await relay(zot, name="weather", args={"city": "Oslo"})
    assert (text_of(result), result.is_error) == ("Bergen: sunny", False)


# --- the rules ----------------------------------------------------------------------------


async def test_without_the_capability_the_call_is_refused(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install_caller(paths, "caller", "--caps", "commands,tools")
    install_target(paths)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        result = await relay(zot, name="weather", args={"city": "Oslo"})
    assert result.is_error
    assert "list `call_tool` in the `capabilities` of your hello" in text_of(result)


async def test_a_chain_holds_four_calls(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install_caller(paths, "caller", "--tools", "r1,r2,r3,r4,r5")
    install_target(paths)
    await start_daemon()
    args: dict[str, Any] = {"city": "Oslo"}
    async with connect(paths.socket, cwd=project) as zot:
        # r1 -> r2 -> r3 -> weather: four calls, the agent's included.
        four = await zot.call_tool(
            "r1", {"name": "r2", "args": {"name": "r3", "args": {"name": "weather", "args": args}}}
        )
        # r1 -> r2 -> r3 -> r4 -> weather: the fifth is refused.
        five = await zot.call_tool(
            "r1",
            {
                "name": "r2",
                "args": {
                    "name": "r3",
                    "args": {"name": "r4", "args": {"name": "weather", "args": args}},
                },
            },
        )
    assert (text_of(four), four.is_error) == ("Oslo: sunny", False)
    assert five.is_error
    assert "a chain holds at most 4 calls (r1 -> r2 -> r3 -> r4 -> weather)" in text_of(five)


async def test_no_tool_twice_in_a_chain(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install_caller(paths, "caller", "--tools", "r1,r2")
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        result = await zot.call_tool("r1", {"name": "r2", "args": {"name": "r1"}})
    assert result.is_error
    assert "'r1' is already in this chain of calls (r1 -> r2)" in text_of(result)


async def test_an_unknown_parent_id_fails(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install_caller(paths)
    install_target(paths)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        result = await relay(zot, name="weather", args={"city": "Oslo"}, parent_id="bogus")
    assert result.is_error
    assert "`parent_id` 'bogus' is no tool call this extension is serving" in text_of(result)


async def test_no_parent_id_while_serving_is_refused(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install_caller(paths)
    install_target(paths)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        result = await relay(zot, name="weather", args={"city": "Oslo"}, no_parent=True)
    assert result.is_error
    assert "without `parent_id` while this extension is serving a tool call" in text_of(result)


async def test_ids_missing_or_in_flight_are_dropped_and_noted(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install_caller(paths)
    install_target(paths)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        empty = {"type": "call_tool", "id": "", "name": "weather", "args": {"city": "X"}}
        await zot.invoke_command("send", json.dumps(empty))
        hang = {"type": "call_tool", "id": "d1", "name": "nz-hang", "args": {}}
        await zot.invoke_command("send", json.dumps(hang))
        again = {"type": "call_tool", "id": "d1", "name": "weather", "args": {"city": "Y"}}
        await zot.invoke_command("send", json.dumps(again))
        # The reply to this one comes after anything said about the ones before it.
        last = {"type": "call_tool", "id": "d2", "name": "weather", "args": {"city": "Z"}}
        await zot.invoke_command("send", json.dumps(last))
        await wait_until(lambda: "d2" in results(log))
        await zot.invoke_command("send", json.dumps({"type": "call_tool_cancel", "id": "d1"}))
    assert set(results(log)) == {"d2"}
    notes = paths.extension_log("caller").read_text()
    assert "call_tool without an `id`: dropped" in notes
    assert "call_tool 'd1': that id is still in flight; ignored" in notes


async def test_at_most_64_calls_in_flight(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install_caller(paths)
    install_target(paths)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        sent = await relay(zot, name="nz-hang", count=65, id="m", no_wait=True)
        assert text_of(sent) == "sent"
        await wait_until(lambda: len(results(log)) == 65)
    got = results(log)
    refused = [r for r in got.values() if "calls in flight already" in r["content"][0]["text"]]
    assert [r["id"] for r in refused] == ["m-64"]
    # The other 64 ended with the call they were made for.
    ended = [r for r in got.values() if "the tool call it was made for" in r["content"][0]["text"]]
    assert len(ended) == 64
    assert all(r["is_error"] for r in got.values())


async def test_a_call_lasts_at_most_tool_timeout(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install_caller(paths)
    nz_log = install_target(paths)
    await start_daemon(msgspec.structs.replace(FAST, tool_timeout=1.0))
    async with connect(paths.socket, cwd=project) as zot:
        args = {"name": "nz-hang", "args": {}}
        result = await zot.call_tool("caller-relay", args, timeout_s=WAIT)
        await wait_until(lambda: frames(nz_log, "cancel"))
    assert result.is_error
    assert "call_tool 'nz-hang' did not finish within 1 s" in text_of(result)


async def test_call_tool_cancel_withdraws_the_call(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install_caller(paths)
    nz_log = install_target(paths)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        result = await relay(zot, name="nz-hang", args={}, id="k", cancel_after=0.2)
        await wait_until(lambda: frames(nz_log, "cancel"))
        # A reply to k would have come before this one's.
        await zot.invoke_command("call", 'weather {"city": "Oslo"}')
    assert text_of(result) == "cancelled"
    (hang,) = [f for f in frames(nz_log, "tool_call") if f["name"] == "nz-hang"]
    assert frames(nz_log, "cancel") == [{"type": "cancel", "id": hang["id"]}]
    assert "k" not in results(log)


async def test_nested_calls_end_with_their_parent(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install_caller(paths)
    nz_log = install_target(paths)
    await start_daemon()
    go = paths.home / "go"
    async with connect(paths.socket, cwd=project) as zot, trio.open_nursery() as nursery:
        call = functools.partial(relay, zot, name="nz-hang", id="p", no_wait=True, when=str(go))
        nursery.start_soon(call)
        await wait_until(lambda: frames(nz_log, "tool_call"))
        go.touch()  # the relay answers its own call now; the nested one is still running
        await wait_until(lambda: "p" in results(log))
        await wait_until(lambda: frames(nz_log, "cancel"))
    (hang,) = frames(nz_log, "tool_call")
    assert frames(nz_log, "cancel") == [{"type": "cancel", "id": hang["id"]}]
    ended = results(log)["p"]
    assert ended["is_error"]
    assert "the tool call it was made for (caller-relay) ended" in ended["content"][0]["text"]


async def test_an_agents_cancel_ends_the_nested_calls(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install_caller(paths)
    nz_log = install_target(paths)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot, trio.open_nursery() as nursery:
        nursery.start_soon(functools.partial(relay, zot, name="nz-hang", args={}))
        await wait_until(lambda: frames(nz_log, "tool_call"))
        nursery.cancel_scope.cancel()  # the client sends `cancel` for its call
    async with connect(paths.socket, cwd=project):
        await wait_until(lambda: frames(nz_log, "cancel"))
    (hang,) = frames(nz_log, "tool_call")
    assert frames(nz_log, "cancel") == [{"type": "cancel", "id": hang["id"]}]


async def test_a_stopped_extensions_calls_are_given_up(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install_caller(paths)
    nz_log = install_target(paths)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        await zot.invoke_command("fire", "nz-hang {}")
        await wait_until(lambda: frames(nz_log, "tool_call"))
        await zot.ext_disable("caller")
        await wait_until(lambda: frames(nz_log, "cancel"))
    (hang,) = frames(nz_log, "tool_call")
    assert frames(nz_log, "cancel") == [{"type": "cancel", "id": hang["id"]}]


# --- the agent's own tools -----------------------------------------------------------------


async def test_a_tool_of_the_agent(start_daemon: StartDaemon, paths: Paths, project: Path) -> None:
    log = install_caller(paths)
    await start_daemon()
    async with connect(paths.socket, cwd=project, capabilities=["host_tools"]) as zot:
        async with trio.open_nursery() as nursery:
            got: list[ap.CallData] = []

            async def call() -> None:
                got.append(await relay(zot, name="bash", args={"command": "ls"}, id="b"))

            nursery.start_soon(call)
            push = await next_host_call(zot)
            assert (push.extension, push.name, push.args) == ("caller", "bash", {"command": "ls"})
            # Made under this agent's call_tool: that request's id (the client numbers them).
            assert isinstance(push.parent_id, int)
            await zot.host_tool_result(push.call_id, [ep.TextBlock("a.txt")])
        # Answered: a second answer finds nothing waiting.
        with pytest.raises(ZotdError) as second:
            await zot.host_tool_result(push.call_id, [ep.TextBlock("again")])
        with pytest.raises(ZotdError) as unknown:
            await zot.host_tool_result("nope", [ep.TextBlock("x")])
    assert (text_of(got[0]), got[0].is_error) == ("a.txt", False)
    assert results(log)["b"]["name"] == "bash"
    assert second.value.code == unknown.value.code == "not_found"


async def test_another_agent_with_host_tools_runs_it(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install_caller(paths)
    await start_daemon()
    async with (
        connect(paths.socket, cwd=project) as plain,
        connect(paths.socket, cwd=project, capabilities=["host_tools"]) as tools,
        trio.open_nursery() as nursery,
    ):
        got: list[ap.CallData] = []

        async def call() -> None:
            got.append(await relay(plain, name="read", args={"path": "x"}))

        nursery.start_soon(call)
        push = await next_host_call(tools)
        assert push.parent_id is None  # another connection's request: not this agent's to know
        with pytest.raises(ZotdError) as other:  # not the connection it was sent to
            await plain.host_tool_result(push.call_id, [ep.TextBlock("stolen")])
        await tools.host_tool_result(push.call_id, [ep.TextBlock("oops")], is_error=True)
    assert (text_of(got[0]), got[0].is_error) == ("oops", True)
    assert other.value.code == "bad_request"
    assert "was sent to another connection" in other.value.message


async def test_no_agent_runs_host_tools(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install_caller(paths)
    await start_daemon()
    async with connect(paths.socket, cwd=project) as zot:
        result = await relay(zot, name="bash", args={})
    assert result.is_error
    assert "no agent that runs tools of its own (`host_tools` in its hello)" in text_of(result)


async def test_the_agent_leaving_fails_its_calls(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    install_caller(paths)
    await start_daemon()
    got: list[ap.CallData] = []
    async with connect(paths.socket, cwd=project) as zot, trio.open_nursery() as nursery:

        async def call() -> None:
            got.append(await relay(zot, name="bash", args={}))

        async with connect(paths.socket, cwd=project, capabilities=["host_tools"]) as tools:
            nursery.start_soon(call)
            await next_host_call(tools)
        # (leaving closes its connection, unanswered)
    assert got[0].is_error
    assert "the agent running it left" in text_of(got[0])


async def test_results_are_capped_at_256_kib(
    start_daemon: StartDaemon, paths: Paths, project: Path
) -> None:
    log = install_caller(paths)
    await start_daemon()
    big = "é" * 200_000  # 400,000 bytes of UTF-8
    async with (
        connect(paths.socket, cwd=project, capabilities=["host_tools"]) as zot,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(functools.partial(relay, zot, name="dump", id="big"))
        push = await next_host_call(zot)
        await zot.host_tool_result(
            push.call_id, [ep.TextBlock("head"), ep.TextBlock(big), ep.TextBlock("tail")]
        )
    reply = results(log)["big"]
    assert reply["truncated"] is True
    texts = [b["text"] for b in reply["content"]]
    assert texts[0] == "head"
    assert len(texts) == 2
    assert len(texts[1].encode()) == (256 * 1024 - 4) // 2 * 2
    assert set(texts[1]) == {"é"}
