"""The command-line programs: ``zotd`` (the daemon) and ``zot`` (for agents and operators)."""
