"""What a connection, a workspace and an extension cost the daemon's heap, and in what.

``python benchmarks/heap.py [--count N]``: an in-process :class:`Hub` (the
daemon's, with the real spawner), measured with :mod:`tracemalloc` and a
census of the objects the collector tracks, three times:

* **connection**: ``N`` idle clients in one workspace without extensions,
  each a :class:`ClientSession` over a real socket pair (so that the streams
  take the file-descriptor path, as the daemon's do) that said ``hello``;
* **workspace**: ``N`` workspaces without extensions, joined as the
  ``hello`` handler joins one (``Hub.join_workspace``, then
  ``wait_settled``), with no connection;
* **extension**: ``N / 10`` further workspaces of ten ``echo_ext.py`` tool
  extensions whose names the daemon already runs elsewhere (real processes).

One of each is made first and kept, so that what only the first pays (a
memo, a dict's first table, an import) stays out; then a snapshot, the
``N`` more, a settling pause, a full collection and a second snapshot. What
grew is printed per unit: by source line (tracemalloc, the line that
allocated it) and by type (how many objects of each type each one adds, and
their ``sys.getsizeof``). RSS (``/proc/self/status``) is read too, for
comparison with ``curves.py``'s slopes; this process runs the clients as
well, so its RSS is no figure of the daemon's.
"""

from __future__ import annotations

import argparse
import gc
import json
import linecache
import os
import shutil
import sys
import tempfile
import tracemalloc
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from systems import ext_argv

from zotd.model.config import Config
from zotd.model.environment import with_own_python
from zotd.model.paths import Paths
from zotd.runtime.hub import Hub
from zotd.runtime.process import spawn
from zotd.runtime.session import ClientSession
from zotd.runtime.workspace import Context

#: Seconds the hub is left alone before a snapshot.
SETTLE = 0.3


@dataclass
class Census:
    """The objects the collector tracks, by type: count and bytes."""

    count: Counter[str]
    size: Counter[str]


def census() -> Census:
    count: Counter[str] = Counter()
    size: Counter[str] = Counter()
    for obj in gc.get_objects():
        name = type(obj).__qualname__
        module = type(obj).__module__
        if module not in ("builtins", None):
            name = f"{module}.{name}"
        count[name] += 1
        size[name] += sys.getsizeof(obj)
    return Census(count, size)


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


#: This file: what it allocates (the clients' ends) is not the daemon's.
SELF = str(Path(__file__).resolve())


def owner(traceback: tracemalloc.Traceback) -> str:
    """Where zotd asked for an allocation: the innermost frame in zotd's code
    (so trio's task, cancel scope or event is charged to the zotd line that
    made it), else the innermost frame; ``client`` for this file's own."""
    innermost_first = list(reversed(list(traceback)))
    for frame in innermost_first:
        if frame.filename == SELF:
            return "client"
        if "/zotd/" in frame.filename and "site-packages" not in frame.filename:
            return f"{_short(frame.filename)}:{frame.lineno}"
    if not innermost_first:
        return "?"
    return f"{_short(innermost_first[0].filename)}:{innermost_first[0].lineno}"


def by_owner(snapshot: tracemalloc.Snapshot) -> tuple[Counter[str], Counter[str]]:
    size: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for stat in snapshot.statistics("traceback"):
        key = owner(stat.traceback)
        size[key] += stat.size
        count[key] += stat.count
    return size, count


@dataclass
class Growth:
    label: str
    units: int
    rss: int
    #: Bytes and blocks by :func:`owner`.
    owned: Counter[str]
    blocks: Counter[str]
    #: Objects and their getsizeof bytes by type.
    count: Counter[str]
    size: Counter[str]

    @property
    def daemon(self) -> int:
        return sum(v for k, v in self.owned.items() if k != "client")


async def measured(label: str, units: int, grow: Callable[[], Awaitable[None]]) -> Growth:
    """What ``grow`` (which adds ``units`` of something) left on the heap."""
    await trio.sleep(SETTLE)
    gc.collect()
    before, census_before, rss_before = tracemalloc.take_snapshot(), census(), rss_kib()
    await grow()
    await trio.sleep(SETTLE)
    gc.collect()
    after, census_after, rss_after = tracemalloc.take_snapshot(), census(), rss_kib()
    keep = [tracemalloc.Filter(False, tracemalloc.__file__)]
    owned, blocks = by_owner(after.filter_traces(keep))
    owned_before, blocks_before = by_owner(before.filter_traces(keep))
    owned.subtract(owned_before)
    blocks.subtract(blocks_before)
    count = census_after.count
    count.subtract(census_before.count)
    size = census_after.size
    size.subtract(census_before.size)
    return Growth(label, units, (rss_after - rss_before) * 1024, owned, blocks, count, size)


def show(g: Growth, top: int) -> None:
    n = g.units
    print(f"\n## {g.label}: {n} more")
    client = g.owned.get("client", 0)
    print(
        f"traced heap, the daemon's side: {g.daemon / n / 1024:.2f} KiB each "
        f"(and {client / n / 1024:.2f} KiB of the clients' ends); "
        f"this process's RSS: {g.rss / n / 1024:.2f} KiB each, clients included"
    )
    print(f"\nby the zotd line that allocated it (bytes, blocks per {g.label}):")
    shown = 0
    for key, size in sorted(g.owned.items(), key=lambda kv: -kv[1])[:top]:
        if size <= 0:
            break
        shown += size
        file, _, line = key.rpartition(":")
        text = linecache.getline(_full(file), int(line)).strip() if line.isdigit() else ""
        print(f"  {size / n:8.0f} B  {g.blocks[key] / n:6.2f}  {key:42} {text[:60]}")
    print(f"  {(sum(g.owned.values()) - shown) / n:8.0f} B          the rest")
    print(f"\nby type (objects per {g.label}, their getsizeof bytes per {g.label}):")
    for name, size in sorted(g.size.items(), key=lambda kv: -kv[1])[:top]:
        if size <= 0:
            break
        print(f"  {size / n:8.0f} B  {g.count[name] / n:6.2f}  {name}")


def _full(short: str) -> str:
    if short.startswith("zotd/"):
        return str(Path(__file__).resolve().parent.parent / short)
    for path in sys.path:
        candidate = Path(path) / short
        if candidate.exists():
            return str(candidate)
    return short


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/zotd/", "/lib/python3"):
        if marker in filename:
            return (
                filename.split(marker, 1)[1]
                if marker != "/zotd/"
                else "zotd/" + filename.split(marker, 1)[1]
            )
    return filename


def install(root: Path, home: str, names: list[str]) -> Paths:
    """A ``ZOT_HOME`` under ``root`` with ``echo_ext.py`` tools of these names."""
    paths = Paths(home=root / home, socket=root / f"{home}.s", config_file=root / "zotd.toml")
    paths.extensions_dir.mkdir(parents=True)
    for name in names:
        argv = ext_argv(name, "tool")
        directory = paths.extensions_dir / name
        directory.mkdir()
        manifest = {"name": name, "version": "1.0.0", "exec": argv[0], "args": argv[1:]}
        (directory / "extension.json").write_text(json.dumps(manifest))
    return paths


def projects(root: Path, prefix: str, made: Counter[str], n: int) -> list[Path]:
    """``n`` new project directories under ``root`` (realpaths, as ``hello`` gives)."""
    out = []
    for _ in range(n):
        directory = root / f"{prefix}{made[prefix]:04d}"
        made[prefix] += 1
        directory.mkdir()
        out.append(Path(os.path.realpath(directory)))
    return out


class Idle:
    """One idle client: the client's end of a socket pair whose other end a session serves."""

    def __init__(self, hub: Hub, nursery: trio.Nursery, number: int) -> None:
        self.client, server = trio.socket.socketpair()
        stream = trio.SocketStream(server)
        self.session = ClientSession(hub, stream, number)
        nursery.start_soon(self.session.run)

    async def hello(self, project: Path) -> None:
        line = {"type": "hello", "id": 1, "cwd": str(project), "client": "idle"}
        await self.client.send(json.dumps(line).encode() + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = await self.client.recv(1 << 16)
            if not chunk:
                raise RuntimeError("the session closed the connection")
            reply += chunk
        if not json.loads(reply).get("success"):
            raise RuntimeError(f"hello failed: {reply!r}")


async def main(count: int, top: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="zh-", dir="/tmp"))
    try:
        paths = install(root, "home", [f"x{i}" for i in range(10)])
        many = install(root, "many-home", [f"n{i:04d}" for i in range(count)])
        empty = install(root, "empty-home", [])
        env = with_own_python(os.environ)
        async with trio.open_nursery() as nursery:
            # A hub without extensions for connections and bare workspaces.
            ctx = Context(
                config=Config(log_level="warning"),
                paths=empty,
                explicit=[],
                spawner=spawn,
                env=env,
            )
            hub = Hub(ctx, cwd=root)
            await nursery.start(hub.run)
            project = root / "p"
            project.mkdir()
            clients: list[Idle] = []

            async def connect(n: int) -> None:
                for _ in range(n):
                    idle = Idle(hub, nursery, len(clients) + 1)
                    await idle.hello(project)
                    clients.append(idle)

            await connect(2)
            results = [await measured("connection", count, lambda: connect(count))]

            made: Counter[str] = Counter()

            async def join(n: int, h: Hub, prefix: str) -> None:
                for directory in projects(root, prefix, made, n):
                    ws = h.join_workspace(directory, provider="", model="")
                    await ws.wait_settled()

            await join(2, hub, "w")
            results.append(await measured("workspace", count, lambda: join(count, hub, "w")))

            # A hub with ten extensions: what each adds to a further workspace.
            ctx10 = Context(
                config=Config(log_level="warning"), paths=paths, explicit=[], spawner=spawn, env=env
            )
            hub10 = Hub(ctx10, cwd=root)
            await nursery.start(hub10.run)
            workspaces = max(1, count // 10)
            await join(2, hub10, "x")
            growth = await measured(
                "extension", workspaces * 10, lambda: join(workspaces, hub10, "x")
            )
            results.append(growth)

            # A hub with ``count`` extensions of new names in one workspace.
            async def open_many() -> None:
                ctx = Context(
                    config=Config(log_level="warning"),
                    paths=many,
                    explicit=[],
                    spawner=spawn,
                    env=env,
                )
                hub = Hub(ctx, cwd=root)
                await nursery.start(hub.run)
                await join(1, hub, "n")

            results.append(await measured("extension of a new name", count, open_many))
            for g in results:
                show(g, top)
            nursery.cancel_scope.cancel()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=200, help="units added (default 200)")
    parser.add_argument("--top", type=int, default=25, help="rows shown per table")
    args = parser.parse_args()
    tracemalloc.start(30)
    trio.run(main, args.count, args.top)
