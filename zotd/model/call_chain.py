"""Current zot's rules for an extension's own ``call_tool``, sans-IO.

An extension may call a tool through the host (ext -> host ``call_tool``,
answered with the host's ``tool_result``). zot bounds that, and zotd keeps
its bounds (zot's ``docs/extensions.md``, "call_tool"):

* a call lasts at most :data:`MAX_SECONDS` (``tool_timeout`` if shorter);
* a chain (a call made while serving a call, and so on) holds at most
  :data:`MAX_CHAIN` calls, the first one included, and no tool twice;
* a call without ``parent_id`` is refused while the extension is serving
  a tool call (what it calls then must hang under that call);
* a result holds at most :data:`RESULT_CAP` bytes (:func:`cap`).

zotd adds one bound of its own: :data:`MAX_OUTSTANDING` calls in flight per
extension. :func:`vet` judges a request; the runtime
(:mod:`zotd.runtime.host_calls`) carries the verdict out.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from enum import Enum

import msgspec

from ..protocol import extension as ep

#: The longest an extension's call may last, in seconds (zot's).
MAX_SECONDS = 60.0
#: The most calls in one chain, the first one included (zot's).
MAX_CHAIN = 4
#: The most bytes of a result's content (zot's 256 KiB).
RESULT_CAP = 256 * 1024
#: The most calls one extension may have in flight (zotd's bound on memory).
MAX_OUTSTANDING = 64


def time_limit(tool_timeout: float) -> float:
    """How long an extension's call may last: ``tool_timeout``, at most
    :data:`MAX_SECONDS` (an interactive tool gets no longer)."""
    return min(tool_timeout, MAX_SECONDS)


class Parent(msgspec.Struct, frozen=True):
    """The tool call an extension serves, that its ``call_tool`` names as
    ``parent_id``: its tool and the tools of the calls above it."""

    tool: str
    above: tuple[str, ...] = ()

    @property
    def chain(self) -> tuple[str, ...]:
        """The tools of a call made under it, outermost first."""
        return (*self.above, self.tool)


class Kind(Enum):
    """What to do with a ``call_tool`` request."""

    #: Run it.
    RUN = "run"
    #: Answer it at once with an error result (``reason``).
    REFUSE = "refuse"
    #: Answer nothing (``reason`` goes to the extension's log).
    DROP = "drop"


class Verdict(msgspec.Struct, frozen=True):
    """:func:`vet`'s answer; ``chain`` is what a call that runs has above it."""

    kind: Kind
    reason: str = ""
    chain: tuple[str, ...] = ()


def chain_refusal(chain: Sequence[str], name: str) -> str | None:
    """Why ``name`` may not be called below ``chain`` (the tools above it,
    outermost first), or ``None``."""
    if name in chain:
        return (
            f"call_tool refused: {name!r} is already in this chain of calls "
            f"({' -> '.join(chain)}); a chain may not call a tool twice"
        )
    if len(chain) + 1 > MAX_CHAIN:
        return (
            f"call_tool refused: a chain holds at most {MAX_CHAIN} calls "
            f"({' -> '.join((*chain, name))})"
        )
    return None


def vet(
    request_id: ep.Id,
    name: str,
    *,
    parent_id: ep.Id | None,
    parent: Parent | None,
    capable: bool,
    serving: bool,
    in_flight: Container[ep.Id],
    outstanding: int = 0,
) -> Verdict:
    """Judges one ``call_tool`` request of an extension.

    Args:
        request_id: its ``id``.
        name: the tool it calls.
        parent_id: its ``parent_id`` (``None``: absent).
        parent: the call ``parent_id`` names, if the extension serves it now.
        capable: the extension's ``hello`` listed ``call_tool``.
        serving: the extension is serving a tool call now.
        in_flight: the ids of its calls still in flight.
        outstanding: how many there are.
    """
    if request_id == "":
        return Verdict(Kind.DROP, "call_tool without an `id`: dropped")
    if request_id in in_flight:
        return Verdict(Kind.DROP, f"call_tool {request_id!r}: that id is still in flight; ignored")
    if not capable:
        return Verdict(
            Kind.REFUSE,
            "call_tool refused: list `call_tool` in the `capabilities` of your hello "
            "to call tools through the host",
        )
    if not name:
        return Verdict(Kind.REFUSE, "call_tool refused: `name` is empty")
    if outstanding >= MAX_OUTSTANDING:
        return Verdict(
            Kind.REFUSE,
            f"call_tool refused: this extension has {outstanding} calls in flight already "
            f"(at most {MAX_OUTSTANDING})",
        )
    if parent_id is None:
        if serving:
            return Verdict(
                Kind.REFUSE,
                "call_tool refused: without `parent_id` while this extension is serving "
                "a tool call; pass the id of the tool_call it is made for",
            )
        return Verdict(Kind.RUN)
    if parent is None:
        return Verdict(
            Kind.REFUSE,
            f"call_tool refused: `parent_id` {parent_id!r} is no tool call this extension "
            "is serving (unknown, or finished)",
        )
    reason = chain_refusal(parent.chain, name)
    if reason is not None:
        return Verdict(Kind.REFUSE, reason)
    return Verdict(Kind.RUN, chain=parent.chain)


# --- the result's cap -----------------------------------------------------------


class Capped(msgspec.Struct):
    """A result cut to fit (see :func:`cap`)."""

    content: list[ep.Block]
    structured: msgspec.Raw | msgspec.UnsetType
    truncated: bool


def size_of(block: ep.Block) -> int:
    """What a block counts against the cap: a text's UTF-8 bytes, an image's
    base64 data and MIME type."""
    if isinstance(block, ep.TextBlock):
        return len(block.text.encode("utf-8", "surrogatepass"))
    return len(block.data) + len(block.mime_type)


def cut_utf8(data: bytes, size: int) -> bytes:
    """The first ``size`` bytes of UTF-8 ``data`` or fewer, ending on a
    character's boundary."""
    if len(data) <= size:
        return data
    end = max(size, 0)
    while end > 0 and data[end] & 0xC0 == 0x80:  # inside a character
        end -= 1
    return data[:end]


def cap(
    content: Sequence[ep.Block],
    structured: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET,
    limit: int = RESULT_CAP,
) -> Capped:
    """``content`` (then ``structured``) within ``limit`` bytes in all.

    Blocks are kept in order while they fit; the first that does not is cut
    at a UTF-8 boundary if it is text (an image cannot be cut: it is
    dropped), and everything after it is dropped. ``structured`` (current
    zot's ``structured_content``) is kept only if it fits in what is left.
    ``truncated`` says something was cut or dropped.
    """
    kept: list[ep.Block] = []
    left = limit
    truncated = False
    for block in content:
        size = size_of(block)
        if not truncated and size <= left:
            kept.append(block)
            left -= size
            continue
        if not truncated and isinstance(block, ep.TextBlock) and left > 0:
            head = cut_utf8(block.text.encode("utf-8", "surrogatepass"), left)
            if head:
                kept.append(ep.TextBlock(head.decode("utf-8", "surrogatepass"), block.format))
                left -= len(head)
        truncated = True
    if not isinstance(structured, msgspec.UnsetType) and len(structured) > left:
        structured = msgspec.UNSET
        truncated = True
    return Capped(kept, structured, truncated)
