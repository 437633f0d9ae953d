"""The command line's house style: counts with the right plural and sizes in decimal units
(:mod:`neardup.io.display`), and the ``--version`` option every console script carries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from neardup.io.display import plural, saved, size

__all__ = ["plural", "saved", "size", "version_option"]


def version_option(prog: str) -> Callable[[Any], Any]:
    """``--version``: print ``prog version`` and exit."""
    from neardup import __version__

    return click.version_option(
        __version__, "--version", prog_name=prog, message="%(prog)s %(version)s"
    )
