"""The zot and zotd commands as a user runs them (real processes where they must be)."""
