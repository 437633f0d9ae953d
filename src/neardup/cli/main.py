"""The ``neardup`` command and its subcommands."""

from __future__ import annotations

import click

from neardup import __version__
from neardup.cli.common import run
from neardup.cli.style import add_version


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="neardup")
def cli() -> None:
    """neardup: near-duplicate detection with 64-bit simhash fingerprints."""


from neardup.cli.fingerprint import fingerprint  # noqa: E402

cli.add_command(fingerprint)
from neardup.cli.dedup import dedup  # noqa: E402

cli.add_command(dedup)
from neardup.cli.index import index  # noqa: E402

cli.add_command(index)
from neardup.cli.distributed import clusters_cmd, find_all_cmd  # noqa: E402

cli.add_command(find_all_cmd)
cli.add_command(clusters_cmd)
from neardup.cli.serve import serve  # noqa: E402

cli.add_command(serve)
from neardup.cli.report import report  # noqa: E402

cli.add_command(report)
from neardup.cli.clean import clean  # noqa: E402

cli.add_command(clean)
from neardup.cli.warmup import warmup  # noqa: E402

cli.add_command(warmup)
add_version(cli, "neardup")


def main(argv: list[str] | None = None) -> None:
    run(cli, "neardup", argv)
