"""``zot ext doctor``'s dry run of an MCP server: MCP's handshake over its
stdio, as :mod:`.mcp_link` speaks it (``initialize``, then ``tools/list``
and ``prompts/list`` as its registrations), bounded by
``mcp_initialize_timeout``, as zotd bounds it. The process itself is :mod:`.dry_run`'s.
"""

from __future__ import annotations

from typing import Any

import mcp_types as mt
import trio
from mcp import ClientSession

from .. import __version__
from ..model.config import Config
from ..model.doctor import Trial
from ..model.manifest import Found
from ..protocol import mcp_map
from .mcp_pipe import Pipe
from .process import Process

#: The most tools (and, apart, prompts) a dry run lists.
MAX_LISTED = 1024


async def talk_mcp(
    found: Found, process: Process, trial: Trial, config: Config, asked: trio.Event
) -> bool:
    """``initialize`` and the listings, within ``mcp_initialize_timeout``; when it
    returns, the server's stdin is closed (MCP's stdio shutdown begins;
    ``asked`` is set just before, unless its stdout had ended: then it
    returns ``True``)."""
    limit = config.mcp_initialize_timeout
    spawned = trio.current_time()
    record = trial.handshake
    record.auto_ready = True

    def note(line: str) -> bool:
        trial.bad_lines += 1
        if not trial.first_bad:
            trial.first_bad = line.partition(": ")[2][:200] or line[:200]
        return True

    pipe = Pipe(config.max_frame_bytes, note)
    done = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pipe.read, process.stdout, done)
        nursery.start_soon(pipe.write, process.stdin)
        try:
            session = ClientSession(
                pipe.read_stream,
                pipe.write_stream,
                client_info=mt.Implementation(name="zotd", version=__version__),
            )
            async with session:
                with trio.move_on_after(limit) as scope:
                    init = await session.initialize()
                    record.hello_s = round(trio.current_time() - spawned, 3)
                    await _list(session, init.capabilities, trial)
                    record.ready_s = round(trio.current_time() - spawned, 3)
                if scope.cancelled_caught:
                    step = "answer `initialize`" if record.hello_s is None else "list its tools"
                    trial.mcp_error = f"did not {step} within the dry run's {limit:g} s"
                    trial.settled = False
        except Exception as exc:  # the session broke: a bad server, or it exited
            if not done.is_set():
                trial.mcp_error = f"broke its MCP session ({_why(exc)})"
        finally:
            ended = done.is_set()  # (before the reader is cancelled: that sets it too)
            if not ended:
                asked.set()
            pipe.close_input()
            nursery.cancel_scope.cancel()
    return ended


async def _list(session: ClientSession, caps: mt.ServerCapabilities, trial: Trial) -> None:
    tools: list[mt.Tool] = []
    prompts: list[mt.Prompt] = []
    if caps.tools is not None:
        tools = await _pages(session.list_tools, "tools")
    if caps.prompts is not None:
        prompts = await _pages(session.list_prompts, "prompts")
    trial.registrations = [
        *(mcp_map.register_tool(t) for t in tools),
        *(mcp_map.register_command(p) for p in prompts),
    ]


async def _pages(list_page: Any, what: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    while len(items) < MAX_LISTED:
        params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await list_page(params=params)
        items.extend(getattr(page, what))
        cursor = page.next_cursor
        if not cursor:
            break
    return items[:MAX_LISTED]


def _why(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
