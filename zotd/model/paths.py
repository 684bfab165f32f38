"""Where zotd keeps things: ``$ZOT_HOME``, the socket, the config file.

Resolved once, from the environment and platformdirs, into a :class:`Paths`
value that everything else is given (tests build their own, in a temporary
directory, and never touch platformdirs).
"""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Mapping
from pathlib import Path

import msgspec

APP = "zot"

#: Longest Unix socket path we accept, in bytes. ``sun_path`` is 108 bytes on
#: Linux and 104 on macOS, including the terminating NUL; use the smaller.
MAX_SOCKET_PATH = 103


class Paths(msgspec.Struct, frozen=True):
    """The daemon's file locations.

    Attributes:
        home: ``$ZOT_HOME``: global extensions and logs live below it.
        socket: the agent socket.
        config_file: ``zotd.toml``.
    """

    home: Path
    socket: Path
    config_file: Path

    @property
    def extensions_dir(self) -> Path:
        """Global extensions: ``$ZOT_HOME/extensions/<name>/``."""
        return self.home / "extensions"

    @property
    def logs_dir(self) -> Path:
        """Logs: ``$ZOT_HOME/logs/``."""
        return self.home / "logs"

    def extension_log(self, name: str) -> Path:
        """An extension's stderr log: ``$ZOT_HOME/logs/ext-<name>.log``.

        Raises:
            ValueError: ``name`` would put it outside the logs directory.
        """
        if "/" in name or "\0" in name:
            raise ValueError(f"extension name {name!r} would leave {self.logs_dir}")
        # (one component, "ext-" first: never "." or ".."; a string join, as
        # a workspace makes one for each of its extensions as it opens)
        return Path(os.path.join(self.home, "logs", f"ext-{name}.log"))

    @property
    def daemon_log(self) -> Path:
        """The log of a daemon started in the background with ``zotd start``."""
        return self.logs_dir / "zotd.log"

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        socket: str | os.PathLike[str] | None = None,
        config_file: str | os.PathLike[str] | None = None,
    ) -> Paths:
        """Resolves the paths from the environment (and explicit overrides).

        ``$ZOT_HOME`` wins over the platform's user state dir; an explicit
        ``socket`` over ``$ZOTD_SOCKET`` over ``zotd.sock`` in the user
        runtime dir; an explicit ``config_file`` over ``$ZOTD_CONFIG`` over
        ``zotd.toml`` in the user config dir.
        """
        env = os.environ if environ is None else environ
        home = Path(env["ZOT_HOME"]) if env.get("ZOT_HOME") else _platform_dir("state")
        if socket is not None:
            sock = Path(socket)
        elif env.get("ZOTD_SOCKET"):
            sock = Path(env["ZOTD_SOCKET"])
        else:
            sock = _platform_dir("runtime") / "zotd.sock"
        if config_file is not None:
            config = Path(config_file)
        elif env.get("ZOTD_CONFIG"):
            config = Path(env["ZOTD_CONFIG"])
        else:
            config = _platform_dir("config") / "zotd.toml"
        return cls(home=home.absolute(), socket=sock.absolute(), config_file=config)


def _platform_dir(kind: str) -> Path:
    import platformdirs  # (only here: a daemon told where everything is never loads it)

    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset and falls back to a
        # private directory in /tmp, which is what we want anyway.
        warnings.simplefilter("ignore")
        if kind == "state":
            return Path(platformdirs.user_state_dir(APP))
        if kind == "runtime":
            return Path(platformdirs.user_runtime_dir(APP))
        return Path(platformdirs.user_config_dir(APP))


def check_socket_path(path: Path) -> None:
    """Raises ValueError with advice if ``path`` is too long for a Unix socket."""
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH:
        raise ValueError(
            f"socket path is {size} bytes, longer than the {MAX_SOCKET_PATH} a Unix socket "
            f"allows: {path}\nset ZOTD_SOCKET (or --socket) to a shorter path"
        )


def check_private_dir(directory: Path) -> None:
    """Raises ValueError with advice unless ``directory`` is the user's own:
    owned by this user (the effective uid) and writable by nobody else.

    Anyone who can write the socket's directory can replace the socket, or
    plant a symbolic link where the lock file goes; a directory owned by
    someone else is theirs to change. Only the directory itself is checked,
    not its ancestors.
    """
    st = os.stat(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise ValueError(
            f"{directory} is not a directory; set ZOTD_SOCKET (or --socket) to a path in one"
        )
    uid = os.geteuid()
    if st.st_uid != uid:
        raise ValueError(
            f"the socket's directory {directory} belongs to uid {st.st_uid}, not to you "
            f"(uid {uid}): zotd keeps its socket only in a directory of your own; "
            "set ZOTD_SOCKET (or --socket) to a path in one"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ValueError(
            f"the socket's directory {directory} is writable by its group or others "
            f"(mode {mode:04o}): zotd keeps its socket only in a directory nobody else can write; "
            f"run `chmod 700 {directory}`, or set ZOTD_SOCKET (or --socket) to another path"
        )
