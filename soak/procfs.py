"""What ``/proc`` says about processes: memory, open file descriptors, pipes
no live process holds the other end of, parentage, start time, and whether a
process carries this run's marker in its environment (Linux only).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass


def rss_mib(pid: int) -> float:
    """VmRSS of ``pid`` in MiB (0 if gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def open_fds(pid: int) -> Counter[str]:
    """What ``pid``'s open file descriptors point to (``pipe``, ``socket``, a path...)."""
    kinds: Counter[str] = Counter()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return kinds
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        kinds[re.sub(r":\[\d+\]$", "", target)] += 1
    return kinds


def dangling_pipes(pid: int) -> int:
    """``pid``'s pipe fds whose other end no other process holds any more
    (the pipes of extensions that are gone)."""

    def pipes(p: int) -> set[str]:
        found: set[str] = set()
        try:
            fds = os.listdir(f"/proc/{p}/fd")
        except OSError:
            return found
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{p}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("pipe:"):
                found.add(target)
        return found

    mine = pipes(pid)
    for other in all_pids():
        if other != pid:
            mine -= pipes(other)
    return len(mine)


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    pgid: int
    state: str
    start: int  # clock ticks after boot
    cmd: str


def proc_info(pid: int) -> ProcInfo | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("utf-8", "replace")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return ProcInfo(pid, int(fields[1]), int(fields[2]), fields[0], int(fields[19]), cmd)


def carries_marker(pid: int, marker: bytes) -> bool:
    """Whether ``pid``'s environment holds this run's marker (``ZOTD_SOAK_RUN=<id>``)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def other_run(pid: int, marker: bytes) -> bool:
    """Whether ``pid`` carries another soak run's marker: a process of a run
    going on beside this one, in a process group whose id this run's
    extensions once had (pids are reused)."""
    name = marker.partition(b"=")[0] + b"="
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return False
    return any(v.startswith(name) and v != marker for v in env)


def all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]
