"""``zotd.toml``: the daemon's settings, decoded by msgspec.

Every field is optional; an absent file means every default. Unknown keys
and wrongly typed values are errors that name the field (an unknown key with
the closest known one, a bad choice with the valid ones), so a typo never
silently falls back to a default. A relative ``socket`` is taken relative to
the file's own directory, so every process reads the same path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from ..protocol.lines import DEFAULT_MAX_LINE

#: An environment variable name (as :func:`zotd.model.env_grants.is_variable_name`).
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

Seconds = Annotated[float, msgspec.Meta(gt=0)]
NonNegSeconds = Annotated[float, msgspec.Meta(ge=0)]

#: zot's own slash commands; an extension may not take these names.
DEFAULT_RESERVED_COMMANDS = (
    "help",
    "clear",
    "compact",
    "model",
    "login",
    "logout",
    "sessions",
    "ext",
    "reload-ext",
    "exit",
    "quit",
)

#: zot's built-in tools; always win over an extension's tool of the same name
#: (reference, "register_tool").
BUILTIN_TOOLS = ("read", "write", "edit", "bash", "skill")

#: The values of ``log_level`` (any case).
LOG_LEVELS = ("debug", "info", "warning", "error")


class RestartPolicy(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """When and how fast a crashed extension is restarted (``[restart]``).

    Like an Erlang/OTP supervisor: restarts back off exponentially, and more
    than ``intensity`` restarts within ``window`` seconds means the
    extension is broken: it is marked failed and left alone until reloaded.
    """

    #: ``on-failure`` (a non-zero exit or a signal), ``always`` (any exit zotd
    #: did not ask for), or ``never``.
    policy: Literal["on-failure", "always", "never"] = "on-failure"
    #: Delay before the first restart; it doubles with each one in the window.
    backoff_initial: NonNegSeconds = 0.5
    #: The longest delay.
    backoff_max: Seconds = 30.0
    #: Restarts allowed within ``window``.
    intensity: Annotated[int, msgspec.Meta(ge=1)] = 5
    window: Seconds = 60.0


class RestartOverride(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Per-extension changes to :class:`RestartPolicy`; unset keys inherit."""

    policy: Literal["on-failure", "always", "never"] | None = None
    backoff_initial: NonNegSeconds | None = None
    backoff_max: Seconds | None = None
    intensity: Annotated[int, msgspec.Meta(ge=1)] | None = None
    window: Seconds | None = None


class ExtensionSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Settings for one extension (``[extensions.<name>]``)."""

    restart: RestartOverride | None = None
    #: Where its verdicts count among the guards of an event (lower first);
    #: overrides the manifest's ``priority``.
    priority: int | None = None
    #: Variables of the daemon's environment it may see, on top of the
    #: allowlist and its manifest's ``env_passthrough`` (an API key, say).
    env_passthrough: list[str] = []
    #: ``workspace`` or ``shared``: overrides the manifest's ``scope``.
    scope: str | None = None
    #: Overrides the manifest's ``lazy``.
    lazy: bool | None = None
    #: Overrides the manifest's ``idle_stop`` (seconds; 0 never).
    idle_stop: float | None = None

    def __post_init__(self) -> None:
        if self.scope is not None and self.scope not in ("workspace", "shared"):
            raise ValueError(f"scope is {self.scope!r}: use 'workspace' or 'shared'")
        if self.idle_stop is not None and self.idle_stop < 0:
            raise ValueError("idle_stop must be 0 (never) or a number of seconds")
        for i, name in enumerate(self.env_passthrough):
            if not _VARIABLE.fullmatch(name):
                raise ValueError(
                    f"env_passthrough[{i}] is {name!r}, not an environment variable name "
                    "(letters, digits and _, not starting with a digit)"
                )


class Config(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Daemon settings. Deadlines are in seconds."""

    #: Wait for an extension to exit after ``shutdown`` (reference, "Lifecycle": 2 s).
    shutdown_timeout: Seconds = 2.0
    #: After SIGTERM, wait this long before SIGKILL (design brief: 1 s).
    kill_timeout: Seconds = 1.0
    #: The whole intercept decision (reference, "event_intercept_response": 5 s).
    intercept_timeout: Seconds = 5.0
    #: A tool call without its own ``timeout_s`` (reference, "tool_call": 60 s).
    tool_timeout: Seconds = 60.0
    #: A command invocation.
    command_timeout: Seconds = 60.0
    #: The agent's ``hello`` waits at most this long for extensions to be ready.
    ready_grace: Seconds = 3.0
    #: An extension that sent ``hello`` but no ``ready`` counts as ready once it
    #: has registered nothing this long (the reference's quick start never sends
    #: ``ready``; newer zot's SDK neither).
    ready_idle: Seconds = 0.2
    #: An extension that has not sent ``hello`` by then is stopped and marked failed.
    hello_timeout: Seconds = 10.0
    #: An MCP server's answer to ``initialize`` (its handshake); longer than
    #: ``hello_timeout``, since ``npx -y`` or ``uvx`` may first download it.
    mcp_initialize_timeout: Seconds = 60.0
    #: Refuse an extension whose ``hello`` names another name than its
    #: manifest; by default it runs under the manifest's name, with a
    #: warning (as current zot does).
    strict_hello_name: bool = False
    #: A workspace with no clients stops after this long.
    idle_timeout: NonNegSeconds = 300.0
    #: Longest frame accepted on any pipe or socket, in bytes.
    max_frame_bytes: Annotated[int, msgspec.Meta(ge=1024)] = DEFAULT_MAX_LINE
    #: Frames that may queue for one extension's stdin before senders wait.
    extension_queue: Annotated[int, msgspec.Meta(ge=1)] = 256
    #: Bytes that may queue for one extension's stdin (frames waiting to be
    #: written); with ``extension_queue``, the bound past which an extension
    #: that stopped reading is treated as stuck.
    extension_queue_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 16 * 1024 * 1024
    #: Bytes of replies and push frames that may wait for one client; past it
    #: the daemon stops reading that client's requests until it reads.
    client_outbox_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 8 * 1024 * 1024
    #: A connection without a successful ``hello`` by then is closed (after an
    #: error frame; a ``hello`` being answered then is let finish).
    client_hello_timeout: Seconds = 5.0
    #: Bytes all connections together may hold in unfinished lines (a request
    #: not yet ended by a newline); past it, the connection that asks for
    #: more is closed with an error.
    max_buffered_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 64 * 1024 * 1024
    #: Connections served at once; past it, a new one gets one ``busy`` error and is closed.
    max_connections: Annotated[int, msgspec.Meta(ge=1)] = 2048
    #: Run project-local extensions without asking for `zot ext trust` first.
    trust_project_extensions: bool = False
    #: An extension's log is rotated past this size (3 older copies are kept).
    max_log_bytes: Annotated[int, msgspec.Meta(ge=4096)] = 10 * 1024 * 1024
    #: Keep a tool call's arguments in the intercept audit trail
    #: (``$ZOT_HOME/logs/audit.jsonl``), not only their sha256 digest.
    audit_args: bool = False
    #: The audit trail is rotated when it would grow past this size (3 older copies are kept).
    audit_max_bytes: Annotated[int, msgspec.Meta(ge=4096)] = 10 * 1024 * 1024
    #: Requests one connection may have in flight; past it, ``busy``.
    max_client_requests: Annotated[int, msgspec.Meta(ge=1)] = 256
    #: Requests all connections together may have in flight; past it, ``busy``.
    max_requests: Annotated[int, msgspec.Meta(ge=1)] = 4096
    #: Slash command names extensions may not register.
    reserved_commands: list[str] = msgspec.field(
        default_factory=lambda: list(DEFAULT_RESERVED_COMMANDS)
    )
    #: Socket path (else ``$ZOTD_SOCKET``, else the user runtime dir).
    #: :func:`load_config` makes it absolute: ``~`` expanded, a relative path
    #: taken relative to the config file's directory.
    socket: str | None = None
    #: If set, every agent must send it in ``hello``.
    token: str | None = None
    #: ``debug``, ``info``, ``warning`` or ``error``.
    log_level: str = "info"
    #: How crashed extensions are restarted.
    restart: RestartPolicy = RestartPolicy()
    #: Per-extension settings, by extension name.
    extensions: dict[str, ExtensionSettings] = msgspec.field(default_factory=dict)

    def priority_for(self, name: str, manifest_priority: int) -> int:
        """Guard priority of extension ``name``: its ``[extensions.<name>]``
        setting, else its manifest's."""
        settings = self.extensions.get(name)
        if settings is not None and settings.priority is not None:
            return settings.priority
        return manifest_priority

    def sharing_for(self, name: str, manifest_sharing: str) -> str:
        """``workspace`` or ``shared`` for extension ``name``: its
        ``[extensions.<name>] scope``, else what its manifest gives
        (:func:`~zotd.model.manifest.sharing_of`)."""
        settings = self.extensions.get(name)
        if settings is not None and settings.scope is not None:
            return settings.scope
        return manifest_sharing

    def lazy_for(self, name: str, manifest_lazy: bool) -> bool:
        """Whether extension ``name`` starts on its first use: its setting, else its manifest's."""
        settings = self.extensions.get(name)
        if settings is not None and settings.lazy is not None:
            return settings.lazy
        return manifest_lazy

    def idle_stop_for(self, name: str, manifest_idle_stop: float) -> float:
        """Seconds without work before extension ``name`` is put to sleep (0
        never): its setting, else its manifest's."""
        settings = self.extensions.get(name)
        if settings is not None and settings.idle_stop is not None:
            return settings.idle_stop
        return manifest_idle_stop

    def restart_for(self, name: str) -> RestartPolicy:
        """The restart policy of extension ``name``: ``[restart]`` with its overrides."""
        settings = self.extensions.get(name)
        override = settings.restart if settings is not None else None
        if override is None:
            return self.restart
        changes = {
            field: getattr(override, field)
            for field in override.__struct_fields__
            if getattr(override, field) is not None
        }
        return msgspec.structs.replace(self.restart, **changes)

    @property
    def stop_bound(self) -> float:
        """Longest a graceful stop of any number of extensions may take.

        Each extension gets ``shutdown_timeout``, then ``kill_timeout`` after
        SIGTERM and again after SIGKILL; they are stopped in parallel. One
        second more covers reaping and draining. Past it, callers cancel.
        """
        return self.shutdown_timeout + 2 * self.kill_timeout + 1.0

    def __post_init__(self) -> None:
        if self.log_level.lower() not in LOG_LEVELS:
            from .config_messages import choices  # (a bad file only)

            raise ValueError(f"field `log_level`: {choices(LOG_LEVELS, self.log_level)}")


class ConfigError(Exception):
    """The config file cannot be used; the message says where and why."""


def resolve_socket(value: str, config_file: Path) -> Path:
    """The absolute socket path that ``socket = value`` in ``config_file`` means.

    ``~`` and ``~user`` are expanded; a relative path is relative to the
    directory holding ``config_file`` (not to the current directory), so
    every process that reads the file finds the same socket.

    Raises:
        ConfigError: ``~`` cannot be expanded (no home directory).
    """
    try:
        path = Path(value).expanduser()
    except RuntimeError as exc:  # no $HOME, no such user
        raise ConfigError(f"{config_file}: field `socket`: {exc}") from None
    if not path.is_absolute():
        path = config_file.absolute().parent / path
    return path


def load_config(path: Path) -> Config:
    """Reads ``path``; a missing file gives the defaults.

    A ``socket`` in the file comes back absolute (:func:`resolve_socket`).

    Raises:
        ConfigError: unreadable file, bad TOML, an unknown key or a bad value.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Config()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        config = msgspec.toml.decode(data, type=Config)
    except msgspec.ValidationError as exc:
        from .config_messages import field_message  # (a bad file only)

        raise ConfigError(f"{path}: {field_message(exc, data)}") from None
    except msgspec.DecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    if config.socket:
        config = msgspec.structs.replace(config, socket=str(resolve_socket(config.socket, path)))
    return config
