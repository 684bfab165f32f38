"""The client library: talk to zotd from trio or asyncio (anyio).

:func:`connect` opens a connection (starting the daemon if none answers, see
:mod:`zotd.client.autostart`) and yields a :class:`Client`; requests that
fail raise :class:`ZotdError` (:class:`NotRunning` when nothing answers,
:class:`WrongUser` when another user's process serves the socket).

Inside: :mod:`~zotd.client.connection`, the protocol's rules sans-IO (ids,
reply matching, push routing); :mod:`~zotd.client.transport`, the anyio I/O
under it; :mod:`~zotd.client.client`, the API (:class:`Client`,
:func:`connect`); :mod:`~zotd.client.errors`; and autostart.

May import :mod:`zotd.protocol` and :mod:`zotd.model` (paths); never the
runtime, the integrations or the CLIs.
"""

from .client import Client, connect
from .errors import NotRunning, WrongUser, ZotdError

__all__ = ["Client", "NotRunning", "WrongUser", "ZotdError", "connect"]
