"""``zotd.toml``: the daemon's settings, decoded by msgspec.

Every field is optional; an absent file means every default. Unknown keys
and wrongly typed values are errors that name the field, so a typo never
silently falls back to a default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import msgspec

from .protocol.lines import DEFAULT_MAX_LINE

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
    #: A workspace with no clients stops after this long.
    idle_timeout: NonNegSeconds = 300.0
    #: Longest frame accepted on any pipe or socket, in bytes.
    max_frame_bytes: Annotated[int, msgspec.Meta(ge=1024)] = DEFAULT_MAX_LINE
    #: Frames that may queue for one extension's stdin before senders wait.
    extension_queue: Annotated[int, msgspec.Meta(ge=1)] = 256
    #: Run project-local extensions without asking for `zot ext trust` first.
    trust_project_extensions: bool = False
    #: An extension's log is rotated past this size (3 older copies are kept).
    max_log_bytes: Annotated[int, msgspec.Meta(ge=4096)] = 10 * 1024 * 1024
    #: Requests one connection may have in flight; past it, ``busy``.
    max_client_requests: Annotated[int, msgspec.Meta(ge=1)] = 256
    #: Requests all connections together may have in flight; past it, ``busy``.
    max_requests: Annotated[int, msgspec.Meta(ge=1)] = 4096
    #: Slash command names extensions may not register.
    reserved_commands: list[str] = msgspec.field(
        default_factory=lambda: list(DEFAULT_RESERVED_COMMANDS)
    )
    #: Socket path (else ``$ZOTD_SOCKET``, else the user runtime dir).
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
        if self.log_level.lower() not in ("debug", "info", "warning", "error"):
            raise ValueError(
                f"log_level must be debug, info, warning or error, not {self.log_level!r}"
            )


class ConfigError(Exception):
    """The config file cannot be used; the message says where and why."""


def load_config(path: Path) -> Config:
    """Reads ``path``; a missing file gives the defaults.

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
        return msgspec.toml.decode(data, type=Config)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{path}: {_field_message(exc)}") from None
    except msgspec.DecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def _field_message(exc: msgspec.ValidationError) -> str:
    # msgspec says "... - at `$.tool_timeout`"; say "field `tool_timeout`" instead.
    text = str(exc)
    if " - at `$." in text:
        what, _, where = text.rpartition(" - at `$.")
        return f"field `{where.rstrip('`')}`: {what}"
    return text
