"""The figures a run collects as it goes: per kind of request (sent, ok, lost,
wrong, errors by code), and everything else the table shows (faults injected,
push frames, intercept verdicts, progress, cancels, panels, the daemon's
memory and file descriptors).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field


@dataclass
class KindStats:
    sent: int = 0
    ok: int = 0
    lost: int = 0
    wrong: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    #: Clean ends that are not error replies: ``abandoned`` (the client gave
    #: the call up), ``stopped`` (the panel's extension stopped instead of
    #: answering a key).
    other: Counter[str] = field(default_factory=Counter)


@dataclass
class Stats:
    kinds: defaultdict[str, KindStats] = field(default_factory=lambda: defaultdict(KindStats))
    lost_samples: list[str] = field(default_factory=list)
    wrong_samples: list[str] = field(default_factory=list)
    injected: Counter[str] = field(default_factory=Counter)
    pushes: Counter[str] = field(default_factory=Counter)
    bad_pushes: int = 0
    push_dropped: int = 0
    duplicates: int = 0
    idless: int = 0
    connections: int = 0
    intercepts: Counter[str] = field(default_factory=Counter)
    progress: Counter[str] = field(default_factory=Counter)
    cancels: Counter[str] = field(default_factory=Counter)
    panels: Counter[str] = field(default_factory=Counter)
    ext_pids: set[int] = field(default_factory=set)
    rss_start: float = 0.0
    rss_peak: float = 0.0
    rss_series: list[tuple[float, float]] = field(default_factory=list)  # (s into the load, MiB)
    rss_end: float = 0.0
    fds_start: Counter[str] = field(default_factory=Counter)
    fds_end: Counter[str] = field(default_factory=Counter)
    dangling_start: int = 0
    marked: bool = False  # whether the run's marker reached the extensions
    dangling_end: int = 0
    final_states: dict[str, str] = field(default_factory=dict)
    #: How long each ``hello`` took (it waits for the extensions to be settled).
    hello_waits: list[float] = field(default_factory=list)
    #: What ``/panels`` of the newer extension said at the end.
    panels_left: str = ""
    #: Panels newer still had open well after they were closed.
    leaked_panels: set[str] = field(default_factory=set)
    #: When each ``stuck_echo`` call's ``timeout`` reply came (wall clock), by nonce.
    stuck_timeouts: dict[str, float] = field(default_factory=dict)
    #: Every ``rss_every`` seconds: (seconds into the load, daemon RSS in MiB,
    #: requests sent so far); the last one at the end, once all is ready again.
    rss_samples: list[tuple[float, float, int]] = field(default_factory=list)
    #: The clients that stopped reading for a while, and what they saw.
    unread: Counter[str] = field(default_factory=Counter)
    #: The latecomer's bursts of registrations after ``ready``, and what came of them.
    late: Counter[str] = field(default_factory=Counter)
    #: Per burst: seconds from the ``/register`` reply to the ``extension_state``
    #: push with all of its registrations, and the pushes until then.
    late_push_waits: list[float] = field(default_factory=list)
    late_push_counts: list[int] = field(default_factory=list)

    def requests_sent(self) -> int:
        return sum(k.sent for k in self.kinds.values())

    def kind(self, name: str) -> KindStats:
        return self.kinds[name]

    def sample(self, where: list[str], text: str) -> None:
        if len(where) < 20:
            where.append(text)
