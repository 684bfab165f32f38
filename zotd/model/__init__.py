"""The model: plain, synchronous code about extensions and the daemon's settings.

Config (``zotd.toml``), paths, the one request error, manifests and their
discovery, the registry of commands and tools, trust, the extensions'
environment, argument checking, the restart policy and the noise budget
(pure trackers: time is passed in), the install operations of ``zot ext``,
log files, the messages that say what to do, and the service unit texts.

May import :mod:`zotd.protocol` and the standard library; no trio, no anyio,
nothing above it. Functions here may block on files (callers in the runtime
run them in worker threads), but never on the network or a process.
"""
