"""The command line's house style: counts with the right plural and sizes in decimal units
(:mod:`neardup.io.display`), and the ``--version`` option every command carries."""

from __future__ import annotations

import click

from neardup.io.display import plural, saved, size

__all__ = ["add_version", "announce_compile", "plural", "saved", "size"]


def add_version(command: click.Command, prog: str) -> click.Command:
    """Give ``command`` and each of its subcommands a ``--version`` option (``prog, version
    X.Y.Z``, as click's own), unless it has one."""
    from neardup import __version__

    def show(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value and not ctx.resilient_parsing:
            click.echo(f"{prog}, version {__version__}")
            ctx.exit()

    todo = [command]
    while todo:
        cmd = todo.pop()
        if isinstance(cmd, click.Group):
            todo += list(cmd.commands.values())
        if not any("--version" in p.opts for p in cmd.params if isinstance(p, click.Option)):
            cmd.params.append(
                click.Option(
                    ["--version"],
                    is_flag=True,
                    expose_value=False,
                    is_eager=True,
                    callback=show,
                    help="Show the version and exit.",
                )
            )
    return command


def announce_compile(
    prog: str, groups: list[str], quiet: bool = False, alongside: list[str] = ()
) -> None:
    """Say once, before it happens, that this run compiles kernels (the first run on a
    machine), and about how long that takes (``alongside``: groups another process compiles
    meanwhile)."""
    from neardup.compiled import first_notice

    if not quiet and (notice := first_notice(groups, alongside)):
        click.echo(f"{prog}: {notice}", err=True)
