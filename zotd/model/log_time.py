"""The times of log lines: the stamp a line begins with, and ``--since``.

A log line may begin with a time, in one of the forms zotd and common
loggers write:

- ``[zotd 2026-11-30 11:00:22.123] ...``: a note of zotd in an extension's
  log (older notes have no fraction of a second);
- ``2026-11-30 11:00:22,123 INFO ...``: a line of the daemon's log
  (Python's logging), or of an extension that logs the same way;
- ``[2026-11-30T11:00:22Z] ...``: a bracketed ISO 8601 time.

A time without a UTC offset is local time (both zotd's notes and its log
write local time); one with an offset or ``Z`` is exact. Times are seconds
since the epoch (floats) from here on.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

#: A stamp at the start of a line: bracketed (``[zotd TIME]``, ``[TIME]``),
#: or bare and followed by a space or the end of the line.
_STAMP = re.compile(
    r"(?P<open>\[(?P<zotd>zotd )?)?"
    r"(?P<date>\d{4}-\d\d-\d\d)[T ](?P<hms>\d\d:\d\d(?::\d\d)?)"
    r"(?P<frac>[.,]\d{1,9})?"
    r"(?P<tz>Z|[+-]\d\d(?::?\d\d)?)?"
    r"(?(open)\]|(?=\s|$))"
)

#: Where a line that may begin with a stamp begins, in bytes: after a
#: newline, what :data:`_STAMP` begins with (it decides: :func:`stamp_of`).
STAMP_START = re.compile(rb"\n(?=(?:\[(?:zotd )?)?\d{4}-\d\d-\d\d[T ]\d\d:\d\d)")

#: An age for ``--since``: a whole number of seconds, minutes, hours or days.
_AGE = re.compile(r"(\d+)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}

#: What ``--since`` takes, for its error message.
SINCE_FORMS = "an ISO 8601 time (2026-11-30, 2026-11-30T11:00, 2026-11-30T11:00:22+01:00) or an age (30s, 10m, 2h, 1d)"


def stamp_of(line: str) -> float | None:
    """The time ``line`` begins with, or None if it begins with none (or
    with one that is no real time, such as a 13th month)."""
    match = _STAMP.match(line)
    if match is None:
        return None
    try:
        return _epoch(match)
    except (ValueError, OverflowError, OSError):  # no such date, or none the platform can place
        return None


def without_stamp(line: str) -> str:
    """``line`` without the time it begins with, for a view that shows the
    time in a column of its own: ``[zotd TIME] x`` reads ``[zotd] x`` (so
    zotd's notes stay told apart from the extension's own lines), ``TIME x``
    and ``[TIME] x`` read ``x``. A line without a stamp is returned as it is."""
    match = _STAMP.match(line)
    if match is None:
        return line
    rest = line[match.end() :]
    if match["zotd"]:
        return "[zotd]" + rest
    return rest[1:] if rest.startswith(" ") else rest


def _epoch(match: re.Match[str]) -> float:
    """The time a :data:`_STAMP` match says, in seconds since the epoch.

    Raises:
        ValueError: the date or time does not exist.
    """
    year, month, day = (int(part) for part in match["date"].split("-"))
    hms = [int(part) for part in match["hms"].split(":")]
    hour, minute, second = [*hms, 0][:3]
    frac = match["frac"]
    micro = int((frac[1:] + "000000")[:6]) if frac else 0
    moment = datetime(year, month, day, hour, minute, second, micro, _zone(match["tz"]))
    return moment.timestamp()  # naive: local time


def _zone(text: str | None) -> timezone | None:
    """The zone of ``Z``, ``+01:00``, ``-0530`` or ``+02``; None (local time) for None."""
    if text is None:
        return None
    if text == "Z":
        return UTC
    digits = text[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
    if hours > 23 or minutes > 59:
        raise ValueError(f"no such UTC offset: {text}")
    offset = timedelta(hours=hours, minutes=minutes)
    return timezone(-offset if text[0] == "-" else offset)


def parse_since(text: str, now: float) -> float:
    """The time ``--since TEXT`` means: an ISO 8601 date or time (local time
    unless it says its offset), or an age back from ``now`` (``30s``,
    ``10m``, ``2h``, ``1d``).

    Raises:
        ValueError: it is neither (the message says what it takes).
    """
    text = text.strip()
    age = _AGE.fullmatch(text)
    if age is not None:
        return now - int(age[1]) * _UNIT[age[2]]
    try:
        return datetime.fromisoformat(text).timestamp()
    except (ValueError, OverflowError, OSError):
        raise ValueError(f"--since takes {SINCE_FORMS}, not {text!r}") from None


def local_text(moment: float) -> str:
    """``2026-11-30 11:00:22.123``: a time as the text view shows it (local time)."""
    when = datetime.fromtimestamp(moment)
    return when.strftime("%Y-%m-%d %H:%M:%S.") + f"{when.microsecond // 1000:03d}"


def iso_text(moment: float) -> str:
    """``2026-11-30T11:00:22.123+01:00``: a time as ``--json`` gives it (local
    time, with its offset)."""
    return datetime.fromtimestamp(moment).astimezone().isoformat(timespec="milliseconds")
