"""``neardup clean``: list and remove what runs killed outright left behind."""

from __future__ import annotations

import os
import tempfile

import click

from neardup.io.display import size
from neardup.io.leftovers import find_leftovers, remove_leftovers
from neardup.pipeline.plan import MEMORY_FS

PROG = "neardup clean"


@click.command("clean", short_help="Remove what killed neardup runs left behind.")
@click.argument("directories", nargs=-1, type=click.Path(file_okay=False))
@click.option("-n", "--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
def clean(directories: tuple[str, ...], dry_run: bool) -> None:
    """Remove the temporary files of neardup runs that were killed outright (SIGKILL, the OOM
    killer, a power cut) from DIRECTORIES (default: the temporary directory, TMPDIR, where
    runs keep their work directories, the memory file system /dev/shm, where small runs keep
    theirs, and the current directory).

    Only files and directories neardup named for itself are touched
    (.NAME.neardup-HOST-PID-RANDOM.tmp), made on this machine by this user, by a process that
    no longer runs; never a file you named. A run removes these by itself in the directories it
    writes to; this command is for directories no run writes to again.
    """
    memory = [MEMORY_FS] if os.path.isdir(MEMORY_FS) else []
    where = directories or (tempfile.gettempdir(), *memory, ".")
    total = 0
    for d in dict.fromkeys(where):
        found = find_leftovers(d) if dry_run else remove_leftovers(d)
        for left in found:
            verb = "would remove" if dry_run else "removed"
            kind = "directory" if left.is_dir else "file"
            click.echo(
                f"{verb} {left.path} ({kind}, {size(left.size)}, "
                f"left by process {left.pid}: {left.name})"
            )
            total += 1
    if not total:
        click.echo(f"nothing to remove in {', '.join(dict.fromkeys(where))}")
