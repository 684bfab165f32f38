"""Fault-injection soak for zotd: many clients, misbehaving extensions, one table.

Starts a real daemon (``python -m zotd``) in a temporary directory with ten
extensions from ``soak/extensions/`` (a well-behaved echo, a crasher, a
hanger, a flooder, a garbage writer, a guard, a guard that rewrites, one
written as newer zot's SDK writes them, with panels and tool progress, one
that stops reading its stdin now and then, and a latecomer that registers
hundreds of tools after ``ready``), then
runs tens of clients (``zotd.client`` under trio, in this process) making
mixed requests while a fault injector reloads extensions, makes the crasher
crash, kills and freezes extension processes from outside, and hangs up
connections with calls in flight, and runs clients that stop reading
their replies for a while (:mod:`soak.stalls`). At the end it stops the daemon with
SIGTERM, looks for processes left behind, and prints the figures.

Every request must end in exactly one reply: a success whose content is
the request's own (each carries a unique nonce that must come back), or a
clean error (``timeout``, ``extension_failed``, ``unavailable`` while an
extension restarts, ``not_found``, ``busy``). A request without a reply within twice its
deadline is *lost*; a success with another call's nonce or malformed content,
or a second reply to one request, is *wrong*. The same holds for what the
newer protocol adds: a guard's rewrite must be what that guard makes of this
request, every ``tool_progress`` push must carry its own call's nonce, a
panel's render must come (or its extension's end be told), with its own
nonce, and a call the client gives up (``cancel``) must still get exactly
one reply, and so must the ``cancel``.

Usage (from the checkout's root)::

    python -m soak [--quick] [--clients N] [--duration S | --minutes M] [--seed N] [--keep]
    python soak/soak.py [--quick] ...    # the same

Exits 1 if any reply (or push frame) was lost or wrong, any process was left
behind, a request failed with an error other than those four (``internal``,
say), the daemon logged an error, it did not exit with 0 on SIGTERM, or the
newer extension still had a panel open at the end.
docs/reliability.md explains the figures.

One module per concern, each importing only those above it:
:mod:`soak.plan` (what a run does and expects), :mod:`soak.figures`,
:mod:`soak.procfs`, :mod:`soak.tap` (the audited byte stream),
:mod:`soak.state` (the run's state, connections, and the sorting of each
reply), the requests (:mod:`soak.requests`, :mod:`soak.intercepts`,
:mod:`soak.panels`), :mod:`soak.clients`, :mod:`soak.faults`, :mod:`soak.stalls`,
:mod:`soak.load` (the run in trio), :mod:`soak.daemon` (its process, its
zotd.toml and extensions, its orphans), :mod:`soak.logs`, :mod:`soak.table`
and :mod:`soak.main` (the command line). ``extensions/`` holds the
extensions' scripts, run as plain Python programs, not imported.
"""
