"""``before_agent_start``: the system prompt, asked of one guard after another.

Current zot lets extensions rewrite the system prompt before the agent's
first model call. Unlike the other intercepts (:mod:`.intercept`, which asks
guards at once, in rounds), this one is a plain chain, as zot defines it:
the guards (ordered by priority, then name) are asked one after another,
each about the prompt the one before it left, and each has a deadline of
its own (``intercept_timeout``, 5 s), which includes queueing and writing
the request, so a guard that does not read its stdin costs its own deadline
and no more. A guard past its deadline is withdrawn (sent ``cancel``).

What a guard's ``event_intercept_response`` does to the prompt
(``system_prompt``):

- a JSON string replaces the whole prompt, exactly (no trimming, no
  merging); ``""`` deletes it;
- absent: the prompt is kept;
- anything else keeps it too, with a diagnostic in that guard's log: a
  value that is not a string, one whose encoding is over :data:`MAX_PROMPT`
  (1 MiB), a malformed reply, a crash, silence past the deadline.

``block`` (and the other events' ``modified_args``, ``replace_text``) mean
nothing here: ignored, and said in the guard's log. The verdict never
blocks; it carries the prompt the last guard left (always, changed or not)
and the guards that changed it, in order.

As for the other intercepts, an ``event_intercept`` frame longer than
``max_frame_bytes`` is never sent (a guard would drop it unread): the
decision fails with ``frame_too_large``, whether the agent's prompt or a
guard's rewrite made it that long.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Final

import msgspec
import trio

from ..model.errors import RequestError
from ..model.metrics import GuardAnswer
from ..protocol import agent as ap
from ..protocol import extension as ep
from .extension import Extension
from .intercept import Outcome
from .verdicts import Verdicts

log = logging.getLogger(__name__)

#: The longest ``system_prompt`` a guard may give, encoded (current zot's limit).
MAX_PROMPT: Final = 1024 * 1024

#: Room for a request id in a frame measured before it has one (as in :mod:`.intercept`).
_ID_ROOM: Final = 20

_EVENT: Final = "before_agent_start"


def agent_prompt(payload: dict[str, msgspec.Raw]) -> str:
    """The system prompt the agent sent in ``payload``.

    Raises:
        RequestError: ``bad_request``: ``system_prompt`` is missing or not a
            JSON string.
    """
    raw = payload.get("system_prompt")
    if raw is None:
        raise RequestError(
            ap.ErrorCode.BAD_REQUEST,
            "`before_agent_start` needs `system_prompt`: the system prompt as assembled "
            '(a string; "" for none)',
        )
    try:
        return msgspec.json.decode(raw, type=str)
    except msgspec.ValidationError:
        raise RequestError(
            ap.ErrorCode.BAD_REQUEST,
            f"`system_prompt` of `before_agent_start` must be a string, not {_kind(raw)}",
        ) from None


async def decide(
    guards: Sequence[Extension],
    payload: dict[str, msgspec.Raw],
    budget: float,
    max_bytes: int,
    out: Outcome | None = None,
) -> ap.InterceptData:
    """Asks ``guards`` in order; each gets the prompt the one before left.

    Args:
        guards: the guards of ``before_agent_start``, in order (see
            :func:`.guard_order.order`).
        payload: the event's fields as the agent sent them, ``event`` and the
            stamp (``cwd``, ``sequence``) included; passed on unchanged but
            for ``system_prompt``.
        budget: each guard's deadline, in seconds (``intercept_timeout``).
        max_bytes: the longest ``event_intercept`` frame to send, without the
            newline (``max_frame_bytes``).
        out: filled in with the guards that changed the prompt and what each
            guard asked answered (for the audit trail), also when it raises.

    Raises:
        RequestError: ``bad_request`` (see :func:`agent_prompt`), or
            ``frame_too_large``: the frame for the next guard, with the
            prompt as the agent sent it or as a guard rewrote it, would be
            longer than ``max_bytes``. Nothing else: a guard's failure keeps
            the prompt.

    Cancellation (the agent's ``cancel``, a hangup) withdraws the question in
    flight (its guard is sent ``cancel``) and raises :exc:`trio.Cancelled`.
    """
    prompt = agent_prompt(payload)
    fields = dict(payload)
    out = out if out is not None else Outcome()
    rewritten_by, verdicts = out.rewritten_by, Verdicts(_EVENT)
    for i, guard in enumerate(guards):
        make = ep.event_intercept_maker(fields)
        size = len(make("")) - 1 + _ID_ROOM
        if size > max_bytes:
            out.verdicts = verdicts.close(timed_out=False)
            raise _too_large(guards, size, max_bytes, rewritten_by)
        verdicts.asked(i, guard, i + 1)  # (each guard its own round)
        new = await _ask(guard, make, budget, verdicts, i)
        verdicts.gave(i, GuardAnswer.ALLOW if new in (None, prompt) else GuardAnswer.REWRITE)
        if new is None:
            continue
        if new != prompt:
            rewritten_by.append(guard.name)
        prompt = new
        fields["system_prompt"] = msgspec.Raw(msgspec.json.encode(prompt))
    if not guards:
        await trio.lowlevel.checkpoint()
    out.verdicts = verdicts.close(timed_out=False)
    return ap.InterceptData(block=False, system_prompt=prompt, rewritten_by=rewritten_by)


async def _ask(
    guard: Extension, make: Callable[[str], bytes], budget: float, verdicts: Verdicts, i: int
) -> str | None:
    """One guard's prompt: the string it gave, or ``None`` to keep the one it
    was sent; its failure or silence told to ``verdicts`` (as guard ``i``)."""
    try:
        with trio.move_on_after(budget) as scope:
            reply = await guard.request(make, ep.EventInterceptResponse)
    except RequestError as exc:
        verdicts.failed(i, exc)
        _keep(guard, f"it failed ({exc.message})")
        return None
    if scope.cancelled_caught:
        verdicts.silent(i)
        _keep(guard, f"it did not answer within {budget:g} s (sent `cancel`)")
        return None
    for field, present in (
        ("block", reply.block),
        ("modified_args", bool(reply.modified_args)),
        ("replace_text", bool(reply.replace_text)),
    ):
        if present:
            guard.note(f"ignored `{field}` in its answer about `{_EVENT}`: it does not apply there")
    raw = reply.system_prompt
    if raw is msgspec.UNSET:
        return None
    if len(raw) > MAX_PROMPT:
        _keep(
            guard, f"its `system_prompt` takes {len(raw)} bytes, over the {MAX_PROMPT}-byte limit"
        )
        return None
    try:
        return msgspec.json.decode(raw, type=str)
    except (msgspec.ValidationError, msgspec.DecodeError):
        _keep(guard, f"its `system_prompt` is {_kind(raw)}, not a string")
        return None


def _keep(guard: Extension, why: str) -> None:
    """Notes, in ``guard``'s log and the daemon's, why its answer kept the prompt."""
    message = f"`{_EVENT}`: the system prompt is kept as it was: {why}"
    guard.note(message)
    log.info("extension %s: %s", guard.name, message)


def _kind(raw: msgspec.Raw) -> str:
    """What JSON value ``raw`` is, in words (``a number``, ``null``, ...)."""
    head = bytes(raw).lstrip()[:1]
    return {
        b"{": "an object",
        b"[": "an array",
        b"t": "a boolean",
        b"f": "a boolean",
        b"n": "null",
        b'"': "a string",
    }.get(head, "a number")


def _too_large(
    guards: Sequence[Extension], size: int, max_bytes: int, rewritten_by: list[str]
) -> RequestError:
    """The error for an ``event_intercept`` frame of ``size`` bytes; noted in
    the log of the guard whose rewrite made it that long, if one did."""
    over = f"{size} bytes, over the {max_bytes}-byte frame limit (max_frame_bytes)"
    if not rewritten_by:
        message = (
            f"intercept refused: the `{_EVENT}` event_intercept frame would take {over}; "
            "a guard would drop it unread"
        )
    else:
        last = rewritten_by[-1]
        message = (
            f"intercept refused: with the system prompt as {last!r} rewrote it, the "
            f"`{_EVENT}` event_intercept frame for the next guard would take {over}; "
            "a guard would drop it unread"
        )
        for guard in guards:
            if guard.name == last:
                guard.note(f"rewrite refused: {message}")
    log.info("%s", message)
    return RequestError(ap.ErrorCode.FRAME_TOO_LARGE, message)
