"""``python -m millipyde``: the same as the ``millipyde`` command."""

from .cli import main

raise SystemExit(main())
