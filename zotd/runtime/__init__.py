"""The runtime: the daemon itself, on trio.

Processes and the streams of their pipes, the extension supervisor, the
intercept decision, workspaces, client sessions, the ``ext_*`` operations,
the listener and the daemon that ties them together; and the watchdog that
outlives a killed daemon.

May import :mod:`zotd.model` and :mod:`zotd.protocol`; never the client,
the integrations or the CLIs.
"""
