"""Sans-IO wire protocols: msgspec Structs, framing and pure encode/decode.

Nothing in this package performs I/O or imports trio, so it can be used and
tested anywhere (including from an extension's own process).
"""
