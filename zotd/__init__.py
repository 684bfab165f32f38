"""zotd: a Trio supervisor daemon that hosts zot extensions for coding agents."""

__version__ = "0.1.0"

#: Version of the extension protocol spoken on the extensions' stdin/stdout.
EXTENSION_PROTOCOL_VERSION = 1

#: Version of the agent protocol spoken on the daemon's Unix socket.
AGENT_PROTOCOL_VERSION = 1
