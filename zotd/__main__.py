"""``python -m zotd``: the same as the ``zotd`` command."""

import gc

gc.disable()  # while the daemon imports and builds itself (see zotd.cli.zotd_cli._tune_gc)

from .cli.zotd_cli import main  # noqa: E402

main()
