"""clock: one command that answers by itself, one that hands over to the model.

- ``/time [ZONE]`` shows the current time, here or in an IANA time zone
  (``/time Asia/Tokyo``, ``/time UTC``); the model is not involved (*display*).
- ``/standup`` asks the model to help write today's stand-up notes, telling
  it today's date, which it does not know by itself (*prompt*).
"""

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from zotd.sdk import Extension, Response, display, error, prompt

ext = Extension("clock", "1.0.0")


@ext.command("time", "show the current time (/time [ZONE], e.g. /time Asia/Tokyo)")
def time(args: str) -> Response:
    if args:
        try:
            now = datetime.now(ZoneInfo(args))
        except (ZoneInfoNotFoundError, ValueError, OSError):
            return error(f"unknown time zone {args!r}: use a name like Europe/Berlin or UTC")
        where = args
    else:
        now = datetime.now().astimezone()
        where = now.tzname() or "local time"
    return display(f"{now:%H:%M:%S} {where}, {now:%A %d %B %Y}")


@ext.command("standup", "ask the agent to help with today's stand-up notes")
def standup(args: str) -> Response:
    today = datetime.now().astimezone()
    focus = f" Today I want to focus on: {args}." if args else ""
    return prompt(
        f"Today is {today:%A %d %B %Y}. Help me write my stand-up: ask me, one "
        "question at a time, what I did yesterday, what I will do today and "
        f"what blocks me, then sum it up in three short bullet points.{focus}"
    )


if __name__ == "__main__":
    ext.run()
