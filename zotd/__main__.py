"""``python -m zotd``: the same as the ``zotd`` command."""

from .cli.zotd_cli import main

main()
