"""The table a run prints, and the reasons it failed (none if it passed)."""

from __future__ import annotations

import re
from collections import Counter

from soak.daemon import Ending
from soak.figures import KindStats, Stats
from soak.logs import NOTES, LogFigures
from soak.plan import ANSWERED_ALREADY, CLEAN_ERRORS, IN_FLIGHT, LEAK_AFTER, UNREAD, Plan

#: A ``stuck_echo`` call the stuck extension read this long after its client
#: got the ``timeout`` reply (and not soon after a stall) was written by zotd
#: after it had given the call up: an abandoned call left in the queue.
ABANDONED_AFTER = 0.5
#: The RSS check applies to runs of this much load or more (shorter ones are
#: mostly warm-up).
PLATEAU_FROM = 600.0


def abandoned_calls(stats: Stats, logs: LogFigures) -> list[str]:
    """The ``stuck_echo`` calls zotd wrote to the stuck extension after
    answering their ``timeout``: ``nonce (+seconds)``."""
    found = []
    for nonce, (at, exempt) in sorted(logs.late_calls.items()):
        given_up = stats.stuck_timeouts.get(nonce)
        if not exempt and given_up is not None and at > given_up + ABANDONED_AFTER:
            found.append(f"{nonce} (+{at - given_up:.1f} s)")
    return found


def rss_levels_off(plan: Plan, stats: Stats) -> str | None:
    """Why the daemon's RSS does not level off (``None`` if it does, or the run
    is too short to tell): its growth over the second half of the load must be
    at most half of its growth over the first half, or 1 MiB."""
    samples = [s for s in stats.rss_samples[:-1] if s[0] <= plan.duration + 1]
    if plan.duration < PLATEAU_FROM or len(samples) < 3:
        return None
    start, end = samples[0][1], samples[-1][1]
    middle = min(samples, key=lambda s: abs(s[0] - plan.duration / 2))[1]
    first, second = middle - start, end - middle
    if second <= max(1.0, first / 2):
        return None
    return (
        f"daemon RSS does not level off: +{first:.1f} MiB over the first half of the load, "
        f"+{second:.1f} MiB over the second"
    )


def rss_table(plan: Plan, stats: Stats) -> list[str]:
    """The RSS samples: minute, MiB, requests sent so far."""
    every = plan.rss_every
    head = f"{every / 60:g} min" if every >= 60 else f"{every:g} s"
    out = [f"{'daemon RSS every ' + head:<30}{'minute':>8}{'MiB':>8}{'requests':>12}"]
    last = len(stats.rss_samples) - 1
    for i, (at, rss, sent) in enumerate(stats.rss_samples):
        label = "  at the end, all ready again" if i == last and i else ""
        out.append(f"{label:<30}{at / 60:8.2f}{rss:8.1f}{sent:12,}")
    return out


def render(
    plan: Plan, stats: Stats, logs: LogFigures, ending: Ending, seconds: float, skipped: list[str]
) -> tuple[str, list[str]]:
    """The table, and the reasons the run failed (none if it passed)."""
    kinds = stats.kinds
    sent = sum(k.sent for k in kinds.values())
    lost = sum(k.lost for k in kinds.values())
    errors: Counter[str] = Counter()
    others: Counter[str] = Counter()
    for k in kinds.values():
        errors.update(k.errors)
        others.update(k.other)
    received = sent - lost
    wrong = sum(k.wrong for k in kinds.values()) + stats.duplicates + stats.idless
    unexpected = {c: n for c, n in errors.items() if c not in CLEAN_ERRORS}
    orphans = len(ending.orphans)

    rows: list[tuple[str, str]] = []

    def row(label: str, value: object = "") -> None:
        rows.append((label, f"{value:,}" if isinstance(value, int) else str(value)))

    row("requests sent", sent)
    row("replies received", received)
    row("replies lost", lost)
    row("wrong replies", wrong)
    if stats.duplicates or stats.idless:
        row("  of which second replies", stats.duplicates)
        row("  of which replies with no id", stats.idless)
    row("successful replies", sum(k.ok for k in kinds.values()))
    row("error replies by code", sum(errors.values()))
    for code, n in sorted(errors.items(), key=lambda kv: -kv[1]):
        row(f"  {code}", n)
    row("clean ends with no reply to check", sum(others.values()))
    row("  abandoned: the client gave the call up", others["abandoned"])
    row("  stopped: the panel's extension stopped instead", others["stopped"])
    row("faults injected by kind", sum(stats.injected.values()) + sum(logs.faults.values()))
    row("  by the soak", "")
    for what, n in sorted(stats.injected.items()):
        row(f"    {what}", n)
    row("  by the extensions (FAULT lines in their logs)", "")
    for what, n in sorted(logs.faults.items()):
        row(f"    {what}", n)
    row("    flooder: notify frames written", logs.flood_frames)
    row("daemon reactions (notes in the extension logs)", "")
    for _, label in NOTES:
        row(f"  {label}", logs.reactions[label])
    row("  noise dropped (notify frames, bad lines)", logs.noise_dropped)
    row("push frames received (notifications())", sum(stats.pushes.values()))
    for what, n in sorted(stats.pushes.items()):
        row(f"  {what}", n)
    row("  dropped by zotd: client not reading fast enough", logs.push_dropped)
    row("  dropped by zotd.client: buffer full", stats.push_dropped)
    row("intercept verdicts", "")
    for what, n in sorted(stats.intercepts.items()):
        row(f"  {what}", n)
    row("tool progress (call_tool with on_progress)", "")
    for what, n in sorted(stats.progress.items()):
        row(f"  {what}", n)
    row("cancellation", "")
    row(
        "  `cancel` requests sent (calls given up)",
        kinds.get("cancel", KindStats()).sent,
    )
    row("    answered, as were the calls they gave up", kinds.get("cancel", KindStats()).ok)
    for what in (IN_FLIGHT, ANSWERED_ALREADY):
        row(f"    {what}", stats.cancels[what])
    row("  `cancel` frames received by the extensions", sum(logs.cancels.values()))
    for name, n in sorted(logs.cancels.items()):
        row(f"    {name}", n)
    row("  hanger: calls it dropped on `cancel`", logs.dropped_work)
    row("panels (newer: /panel)", "")
    for what in ("opened", "rendered", "closed by the client", "closed by the extension (`q`)"):
        row(f"  {what}", stats.panels[what])
    row("  closed by zotd: its extension stopped", others["stopped"])
    row("  keys and sizes for panels newer had not opened", logs.unknown_panels)
    row(f"  still open in newer {LEAK_AFTER:g} s after they closed", len(stats.leaked_panels))
    left = re.match(r"open (\d+):", stats.panels_left)
    row("  open in newer at the end (`/panels`)", left.group(1) if left else stats.panels_left)
    row("stuck stdin (stuck: stalls of 1-4 s)", "")
    row("  stuck_echo calls read after their deadline", len(logs.late_calls))
    row("    soon after a stall (written before it)", sum(e for _, e in logs.late_calls.values()))
    abandoned = abandoned_calls(stats, logs)
    row(f"    written {ABANDONED_AFTER:g} s or more after their `timeout` reply", len(abandoned))
    row("clients that stopped reading their replies", stats.injected[UNREAD])
    for what, n in stats.unread.items():
        row(f"  {what}", n)
    row("registrations after `ready` (latecomer: /register)", "")
    for what, n in stats.late.items():
        row(f"  {what}", n)
    for what, values, unit in (
        ("  extension_state with all of a burst: after (s)", stats.late_push_waits, ".2f"),
        ("  latecomer's pushes until then, per burst", stats.late_push_counts, "d"),
    ):
        if values:
            ordered = sorted(values)
            mid, top = ordered[len(ordered) // 2], ordered[-1]
            row(f"{what}, median / most", f"{mid:{unit}} / {top:{unit}}")
    row("connections opened", stats.connections)
    waits = sorted(stats.hello_waits)
    if waits:
        slow = sum(1 for w in waits if w >= 0.5)
        row(
            "  hello: median / slowest (s), 0.5 s or more",
            f"{waits[len(waits) // 2]:.3f} / {waits[-1]:.2f}, {slow}",
        )
    row("extension processes started", len(logs.pids | stats.ext_pids))
    row(
        "daemon RSS start / end (MiB)",
        f"{stats.rss_start:.1f} / {stats.rss_end:.1f} (peak {stats.rss_peak:.1f})",
    )
    fds_start, fds_end = sum(stats.fds_start.values()), sum(stats.fds_end.values())
    series = stats.rss_series
    if series:
        marks = [
            min(series, key=lambda sample: abs(sample[0] - plan.duration * q))[1]
            for q in (0.25, 0.5, 0.75)
        ]
        row(
            "  at 25% / 50% / 75% of the load",
            " / ".join(f"{m:.1f}" for m in marks),
        )
    row("daemon open fds start / end", f"{fds_start} / {fds_end}")
    row(
        "  pipes to no live process start / end",
        f"{stats.dangling_start} / {stats.dangling_end}",
    )
    code = "none (killed)" if ending.exit_code is None else str(ending.exit_code)
    row("daemon exit code after SIGTERM", f"{code} in {ending.exit_seconds:.2f} s")
    row("daemon errors logged", len(logs.daemon_errors))
    row("orphans left", orphans)
    row("  run marker in the extensions' environment", "yes" if stats.marked else "NO")
    row("duration", f"{seconds:.1f} s ({plan.duration:g} s of load)")

    width = max(len(label) for label, _ in rows) + 2
    vwidth = max(len(value) for _, value in rows)
    title = (
        f"zotd soak: {plan.clients} clients x {plan.workers} workers, "
        f"{plan.duration:g} s of load, seed {plan.seed}{' (quick)' if plan.quick else ''}"
    )
    rule = "-" * max(width + vwidth, len(title))
    out = [title, rule]
    out += [f"{label:<{width}}{value:>{vwidth}}" for label, value in rows]
    out.append(rule)
    codes = sorted(errors, key=lambda c: -errors[c])
    ends = sorted(others, key=lambda c: -others[c])
    header = ["requests by kind", "sent", "ok", *codes, *ends, "lost", "wrong"]
    table = [header] + [
        [
            k,
            str(s.sent),
            str(s.ok),
            *(str(s.errors[c]) for c in codes),
            *(str(s.other[c]) for c in ends),
            str(s.lost),
            str(s.wrong),
        ]
        for k, s in sorted(kinds.items())
    ]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        cells = "".join(f"{c:>{w + 2}}" for c, w in zip(r[1:], widths[1:], strict=True))
        out.append(f"{r[0]:<{widths[0]}}{cells}")
    out.append(rule)
    out += rss_table(plan, stats)
    out.append(rule)
    if skipped:
        out.append("zotd.toml keys this zotd does not know (skipped): " + ", ".join(skipped))

    failures = []
    if lost:
        failures.append(f"{lost} replies lost")
    if wrong or stats.bad_pushes:
        failures.append(f"{wrong} wrong replies, {stats.bad_pushes} bad push frames")
    if orphans:
        failures.append(f"{orphans} processes left behind")
    if unexpected:
        failures.append(f"unexpected error replies: {unexpected}")
    if ending.exit_code != 0:
        failures.append(f"daemon exit code after SIGTERM: {code}")
    if logs.daemon_errors:
        failures.append(f"{len(logs.daemon_errors)} errors in the daemon log")
    leftover = stats.panels_left.startswith("open ") and not stats.panels_left.startswith("open 0:")
    if (stats.leaked_panels or leftover) and not logs.queue_full["newer"]:
        # A `panel_close` (or the `cancel` of a `/panel`) dropped from a full
        # stdin queue would explain it; nothing else does.
        failures.append(
            f"{len(stats.leaked_panels)} panels left open in newer after they closed; "
            f"at the end: {stats.panels_left}"
        )
    if abandoned:
        failures.append(
            f"{len(abandoned)} stuck_echo calls written to the stuck extension after their "
            "`timeout` reply (abandoned calls not withdrawn from its queue)"
        )
    flat = rss_levels_off(plan, stats)
    if flat is not None:
        failures.append(flat)
    for sample in stats.lost_samples:
        out.append(f"lost: {sample}")
    for sample in abandoned[:20]:
        out.append(f"abandoned call written: {sample}")
    for sample in stats.wrong_samples:
        out.append(f"wrong: {sample}")
    for o in ending.orphans:
        out.append(f"orphan: pid {o.pid} pgid {o.pgid} ppid {o.ppid} {o.cmd[:100]}")
    states = " ".join(f"{n}={s}" for n, s in stats.final_states.items())
    out.append(f"extension states at the end: {states}")
    if fds_end != fds_start:
        grown = (stats.fds_end - stats.fds_start) + Counter(
            {f"-{k}": v for k, v in (stats.fds_start - stats.fds_end).items()}
        )
        out.append(f"daemon fds that differ (end - start): {dict(grown)}")
    for line in logs.daemon_errors[:10]:
        out.append(f"daemon log: {line[:200]}")
    out.append("FAIL: " + "; ".join(failures) if failures else "PASS")
    return "\n".join(out), failures


# --- main ---------------------------------------------------------------------------
