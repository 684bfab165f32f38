"""Agent protocol v1: the requests a client sends, one tagged Struct each.

Every request carries an ``id`` (a string or an integer) and a ``type`` (its
tag); :data:`Request` is their union, from which the decoder in
:mod:`.agent` takes its tags. Re-exported by :mod:`zotd.protocol.agent`.
"""

from __future__ import annotations

import msgspec

from .extension import Block

Id = str | int


class _Request(msgspec.Struct, tag_field="type", kw_only=True, gc=False):
    id: Id


class Hello(_Request, tag="hello"):
    """First request on a connection: which workspace, and who is asking."""

    protocol_version: int = 1
    cwd: str | None = None
    provider: str = ""
    model: str = ""
    client: str = ""
    token: str | None = None
    #: ``False``: join no workspace (for operator tools: ``status``, ``shutdown``).
    attach: bool = True
    #: What this agent can do: ``interactive`` (it can show UI: interactive
    #: tools get no reply deadline), ``host_tools`` (it answers
    #: ``host_tool_call`` pushes for tools of its own).
    capabilities: list[str] = []


class Ping(_Request, tag="ping"):
    """Liveness check."""


class ListExtensions(_Request, tag="list_extensions"):
    """Every extension of the workspace, with its live state."""


class ListCommands(_Request, tag="list_commands"):
    """Every slash command of the workspace."""


class ListTools(_Request, tag="list_tools"):
    """Every tool of the workspace."""


class InvokeCommand(_Request, tag="invoke_command"):
    """Runs a slash command; ``args`` is what the user typed after its name."""

    name: str
    args: str = ""


class CallTool(_Request, tag="call_tool"):
    """Calls a tool; ``args`` must be a JSON object."""

    name: str
    args: msgspec.Raw = msgspec.Raw(b"{}")
    timeout_s: float | None = None


class EmitEvent(_Request, tag="emit_event"):
    """A lifecycle event; every field but ``id`` and ``type`` goes to the subscribers."""

    event: str


class Intercept(_Request, tag="intercept"):
    """Asks the guards whether an action may go ahead: a tool call (``tool_*``
    fields), a turn (``step``) or an assistant message (``text``)."""

    event: str = "tool_call"
    tool_id: str = ""
    tool_name: str = ""
    tool_args: msgspec.Raw = msgspec.Raw(b"{}")
    step: int | None = None
    text: str | None = None


class PanelKey(_Request, tag="panel_key"):
    """A key the user pressed in a panel this connection opened.

    ``extension`` may be left out while no two of the connection's open
    panels share ``panel_id``.
    """

    panel_id: str
    key: str
    text: str = ""
    extension: str = ""


class PanelResize(_Request, tag="panel_resize"):
    """The size (in cells) of a panel this connection opened."""

    panel_id: str
    width: int
    height: int
    extension: str = ""


class PanelClose(_Request, tag="panel_close"):
    """Closes a panel this connection opened."""

    panel_id: str
    extension: str = ""


class CancelCall(_Request, tag="cancel"):
    """Gives up this connection's ``call_tool``, ``invoke_command`` or
    ``intercept`` whose ``id`` is ``request_id``: the extensions working on it
    are told, and its reply is a ``cancelled`` error."""

    request_id: Id


class HostToolResult(_Request, tag="host_tool_result"):
    """The answer to a ``host_tool_call`` push: the result of the agent's own
    tool that an extension called."""

    call_id: str
    content: list[Block] = []
    is_error: bool = False


class ListSkills(_Request, tag="list_skills"):
    """Every skill the workspace's extensions ship (manifest ``skills``)."""


class ExtEnv(_Request, tag="ext_env"):
    """The environment variables an extension is let see beyond its manifest:
    ``allow`` and ``deny`` change them (and restart it); the reply names
    the variables it gets, never their values."""

    name: str
    allow: list[str] = []
    deny: list[str] = []


class Subscribe(_Request, tag="subscribe"):
    """Turns push frames on (or off) for this connection."""

    notifications: bool = True


class ExtInstall(_Request, tag="ext_install"):
    """Installs from a directory or git URL into ``scope`` (``global`` or ``project``)."""

    source: str
    scope: str = "global"


class ExtRemove(_Request, tag="ext_remove"):
    """Stops an installed extension everywhere and deletes its directory."""

    name: str


class ExtEnable(_Request, tag="ext_enable"):
    """Sets ``enabled: true`` in the manifest and starts the extension."""

    name: str


class ExtDisable(_Request, tag="ext_disable"):
    """Sets ``enabled: false`` in the manifest and stops the extension."""

    name: str


class ExtReload(_Request, tag="ext_reload"):
    """Restarts one extension (or all) from its manifest on disk."""

    name: str | None = None


class ExtTrust(_Request, tag="ext_trust"):
    """Trusts the workspace's project-local extensions as they are now, and starts them."""


class ExtLogs(_Request, tag="ext_logs"):
    """The last ``lines`` lines of an extension's log."""

    name: str
    lines: int = 100


class ExtDev(_Request, tag="ext_dev"):
    """Runs the extension in ``dir`` (an absolute path) for this workspace
    alone, ahead of an installed one of its name, restarted whenever its
    files change, for as long as this connection lasts; what it does then
    comes as ``ext_dev`` pushes."""

    dir: str


class Status(_Request, tag="status"):
    """The daemon's pid, version, socket and workspaces."""


class Shutdown(_Request, tag="shutdown"):
    """Stops the daemon gracefully, after replying."""


Request = (
    Hello
    | Ping
    | ListExtensions
    | ListCommands
    | ListTools
    | InvokeCommand
    | CallTool
    | EmitEvent
    | Intercept
    | PanelKey
    | PanelResize
    | PanelClose
    | CancelCall
    | HostToolResult
    | ListSkills
    | ExtEnv
    | Subscribe
    | ExtInstall
    | ExtRemove
    | ExtEnable
    | ExtDisable
    | ExtReload
    | ExtTrust
    | ExtLogs
    | ExtDev
    | Status
    | Shutdown
)
