"""What both protocols share: classifying frames that fail to decode.

A line that does not decode as a known frame is one of three things, and the
daemon treats each differently:

* not a JSON object at all: :class:`FrameError` (logged and skipped, or a
  ``bad_request`` reply);
* a JSON object whose ``type`` we do not know: :class:`UnknownFrame`, logged
  and ignored so that newer peers keep working (forward compatibility);
* a known ``type`` with missing or wrongly typed fields: :class:`FrameError`
  carrying whatever ``id`` could be read, so a reply that was owed can still
  be answered (with an error) instead of being lost.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Any, Generic, TypeVar, cast

import msgspec

T = TypeVar("T")


class FrameError(Exception):
    """A line that is not a valid frame.

    Attributes:
        message: what is wrong, for humans.
        id: the frame's ``id`` if one could be read, else ``None``.
        type: the frame's ``type`` if one could be read, else ``None``.
    """

    def __init__(self, message: str, *, id: Any = None, type: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.id = id
        self.type = type


class UnknownFrame(msgspec.Struct, frozen=True):
    """A JSON object with a ``type`` this version does not know."""

    type: str
    id: Any = None


class _Envelope(msgspec.Struct):
    # Raw, so that no value (1e400, say) can fail the envelope itself.
    type: msgspec.Raw = msgspec.Raw(b"null")
    id: msgspec.Raw = msgspec.Raw(b"null")


_envelope = msgspec.json.Decoder(_Envelope)
_any: msgspec.json.Decoder[Any] = msgspec.json.Decoder()


class FrameDecoder(Generic[T]):
    """Decodes one line into a frame of a tagged union, classifying failures.

    Args:
        union: the tagged union of msgspec Structs (tag field ``type``).
        known: every tag of the union.
    """

    __slots__ = ("_decoder", "_known")

    def __init__(self, union: Any, known: frozenset[str]) -> None:
        self._decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(union)
        self._known = known

    def decode(self, line: bytes) -> T | UnknownFrame:
        """Returns the frame, or :class:`UnknownFrame`; raises :class:`FrameError`."""
        if not line.isascii():
            # msgspec does not check the UTF-8 of what it skips or keeps raw
            # (unknown fields, tool args), and those bytes would be passed on.
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                rid, kind = self._id_and_type(line)
                message = f"invalid JSON: not UTF-8 (byte {exc.start})"
                raise FrameError(message, id=rid, type=kind) from None
        try:
            return self._decoder.decode(line)
        except msgspec.ValidationError as exc:
            # (ValidationError subclasses DecodeError, so it is caught first.)
            return self._classify(line, exc)
        except msgspec.DecodeError as exc:
            raise FrameError(f"invalid JSON: {exc}") from None
        except RecursionError:
            raise FrameError(_TOO_DEEP) from None

    def decode_all(self, lines: Sequence[object]) -> list[T] | None:
        """The frames of many lines (a read's worth), decoded in one go; or
        ``None`` when they cannot all be (a line that is blank, not ASCII,
        not a known frame, or not a line at all: an ``Oversized`` marker,
        say), and then each line is for :meth:`decode`, which says why.

        One call into msgspec for the whole read, instead of one per line:
        on the path of every frame.
        """
        try:
            data = b"\n".join(cast("Sequence[bytes]", lines))
        except TypeError:  # (one is not bytes: a marker)
            return None
        if not data.isascii():  # (see `decode`: the UTF-8 of what msgspec skips)
            return None
        try:
            frames: list[T] = self._decoder.decode_lines(data)
        except (msgspec.DecodeError, RecursionError):  # (ValidationError included)
            return None
        return frames if len(frames) == len(lines) else None  # (a blank line skipped)

    def _id_and_type(self, line: bytes) -> tuple[Any, str | None]:
        # Best effort, for the error reply to a line that is not valid JSON.
        try:
            env = _envelope.decode(line)
        except (msgspec.DecodeError, RecursionError):
            return None, None
        kind = _loose(env.type)
        return _loose(env.id), kind if isinstance(kind, str) and kind in self._known else None

    def _classify(self, line: bytes, exc: msgspec.ValidationError) -> UnknownFrame:
        # The line did not fit the union. Read just `type` and `id` to say why.
        try:
            env = _envelope.decode(line)
        except msgspec.ValidationError:
            raise FrameError("a frame must be a JSON object") from None
        except msgspec.DecodeError as bad_json:
            # The union gave up on a field before reaching the syntax error.
            raise FrameError(f"invalid JSON: {bad_json}") from None
        except RecursionError:
            raise FrameError(_TOO_DEEP) from None
        kind, rid = _loose(env.type), _loose(env.id)
        if not isinstance(kind, str):
            raise FrameError("missing or non-string `type`", id=rid) from None
        if kind not in self._known:
            return UnknownFrame(type=kind, id=rid)
        raise FrameError(f"bad `{kind}` frame: {exc}", id=rid, type=kind) from None


def _loose(raw: msgspec.Raw) -> Any:
    """A raw JSON value, or ``None`` if even that cannot be read (1e400, say)."""
    try:
        return _any.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None


#: msgspec raises RecursionError past about a thousand levels of nesting.
_TOO_DEEP = "invalid JSON: nested too deeply"


def tags_of(*types: Any) -> frozenset[str]:
    """The ``type`` tags of tagged Struct classes, or of unions of them.

    ``tags_of(ExtensionFrame)`` reads the tags off the union itself, so that
    a union of frame types is spelled once.
    """
    out = set()
    for cls in types:
        members = typing.get_args(cls) or (cls,)
        for member in members:
            tag = member.__struct_config__.tag
            assert isinstance(tag, str), f"{member.__name__} has no string tag"
            out.add(tag)
    return frozenset(out)


def is_json_object(raw: msgspec.Raw) -> bool:
    """Whether raw JSON text is an object (cheap: looks at the first byte)."""
    view = memoryview(raw)
    if not view:
        return False
    first = view[0]
    if first in _JSON_SPACE:
        return bytes(raw).lstrip()[:1] == b"{"
    return first == 0x7B  # {


#: The bytes of JSON's whitespace.
_JSON_SPACE = frozenset(b" \t\r\n")
