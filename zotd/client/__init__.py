"""The client library: talk to zotd from trio or asyncio (anyio).

:func:`connect` opens a connection (starting the daemon if none answers, see
:mod:`zotd.client.autostart`) and yields a :class:`Client`; requests that
fail raise :class:`ZotdError` (:class:`NotRunning` when nothing answers).

May import :mod:`zotd.protocol` and :mod:`zotd.model` (paths); never the
runtime, the integrations or the CLIs.
"""

from .connection import Client, NotRunning, ZotdError, connect

__all__ = ["Client", "NotRunning", "ZotdError", "connect"]
