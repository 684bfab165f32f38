"""The startup floor: spawn extensions in parallel with bare trio, nothing else.

Reads a JSON list of command lines on stdin, starts them all at once, waits
until each has written its ``ready`` frame, prints ``ready``, then kills them.
"""

from __future__ import annotations

import json
import subprocess
import sys

import trio


async def wait_ready(process: trio.Process) -> None:
    assert process.stdout is not None
    seen = b""
    while b'"ready"' not in seen:
        chunk = await process.stdout.receive_some(1 << 16)
        if not chunk:
            raise RuntimeError(f"{process.args!r} exited before `ready`")
        seen += chunk


async def main(argvs: list[list[str]]) -> None:
    processes = [
        await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for argv in argvs
    ]
    async with trio.open_nursery() as nursery:
        for process in processes:
            nursery.start_soon(wait_ready, process)
    print("ready", flush=True)
    for process in processes:
        process.kill()
        await process.wait()


if __name__ == "__main__":
    trio.run(main, json.load(sys.stdin))
