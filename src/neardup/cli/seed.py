"""``simhash-find-all`` and ``simhash-find-clusters``: the seed command-line tools.

Contract (kept from seomoz/simhash-cpp's tools): newline-separated unsigned decimal fingerprints in,
newline-separated JSON arrays out. Input values are a set (repeats collapse to one value).
find-all writes ``[a, b]`` per matching pair with ``a < b``; find-clusters writes each cluster of
two or more values as ``[h1, h2, ...]`` ascending. Rows are sorted, so output is deterministic.
"""

from __future__ import annotations

import click
import numpy as np

from neardup.cli.common import (
    Reporter,
    blocks_option,
    distance_option,
    output_option,
    quiet_option,
    run,
)
from neardup.cli.style import add_version, announce_compile, plural
from neardup.core import small
from neardup.core.small import cluster_groups_small, find_all_small, find_clusters_small
from neardup.errors import holding
from neardup.io.formats import display_name, format_json_rows, read_fingerprints
from neardup.io.writers import OutputSet


def _common(f):
    f = quiet_option(f)
    f = blocks_option(f)
    f = distance_option()(f)
    f = output_option(f)
    f = click.option(
        "--input", "-i", "input_", default="-", show_default=True, help="Input file ('-' = stdin)."
    )(f)
    return f


def _load(input_: str, distance: int, blocks: int | None, rep: Reporter):
    """Read the distinct input values and the layout (None: a tiny input, answered by brute
    force without numba); all validation happens before any output."""
    if distance < 0:
        raise click.UsageError(f"distance must be >= 0 (got distance={distance})")
    if blocks is not None:
        from neardup.core.search import resolve_layout

        resolve_layout(0, distance, blocks)
    values = np.unique(read_fingerprints(input_))
    read = (
        f"read {plural(len(values), 'distinct fingerprint')} from {display_name(input_)} "
        f"in {rep.lap():.2f}s"
    )
    if blocks is None and len(values) <= small.SMALL_INPUT and distance < 64:
        n = len(values)
        rep.say(f"{read}; brute force over {plural(n * (n - 1) // 2, 'pair')}")
        return values, None
    from neardup.core.search import resolve_layout

    announce_compile(rep.prog, ["search"], rep.quiet)
    layout = resolve_layout(len(values), distance, blocks)
    rep.say(f"{read}; blocks={layout.blocks}, tables={layout.n_tables}")
    return values, layout


_HOLDING = (
    "the input text, its fingerprints and the search keys (about 60 bytes per fingerprint), "
    "and the {} found"
)
_FIX = "split the input, lower --distance, or run `neardup {}` on Dask (--workers N)"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@_common
def find_all_command(
    input_: str, output: str, distance: int, blocks: int | None, quiet: bool
) -> None:
    """Write every pair of input fingerprints within DISTANCE bits as a JSON array [a, b], a < b."""
    rep = Reporter("simhash-find-all", quiet)
    with OutputSet([input_]) as outs, holding(_HOLDING.format("pairs"), _FIX.format("find-all")):
        out = outs.file(output)
        values, layout = _load(input_, distance, blocks, rep)
        if layout is None:
            pairs = find_all_small(values, distance)
        else:
            from neardup.core.search import find_all

            pairs = find_all(values, layout.distance, layout.blocks)
        rep.say(f"found {plural(len(pairs), 'pair')} in {rep.lap():.2f}s")
        data = format_json_rows(values[pairs].reshape(-1), np.arange(0, 2 * len(pairs) + 1, 2))
        with outs.open(out) as f:
            f.write(data)
        outs.commit()
    rep.say(f"wrote {display_name(output, output=True)} in {rep.lap():.2f}s")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@_common
@click.option("--singletons", is_flag=True, help="Also write values that match nothing, as [h].")
def find_clusters_command(
    input_: str, output: str, distance: int, blocks: int | None, quiet: bool, singletons: bool
) -> None:
    """Write each cluster (connected component of matches) as a JSON array of its fingerprints."""
    rep = Reporter("simhash-find-clusters", quiet)
    with OutputSet([input_]) as outs, holding(_HOLDING.format("clusters"), _FIX.format("clusters")):
        out = outs.file(output)
        values, layout = _load(input_, distance, blocks, rep)
        if layout is None:
            labels = find_clusters_small(values, distance)
            groups = cluster_groups_small(labels, min_size=1 if singletons else 2)
        else:
            from neardup.core.search import cluster_groups, find_clusters

            labels = find_clusters(values, layout.distance, layout.blocks)
            groups = cluster_groups(labels, min_size=1 if singletons else 2)
        found = plural(sum(len(g) > 1 for g in groups), "cluster")
        rep.say(f"found {found} in {rep.lap():.2f}s")
        # values are sorted and groups hold ascending positions, so each row is ascending and rows
        # are ordered by their smallest value
        flat = np.concatenate(groups) if groups else np.empty(0, dtype=np.int64)
        ptr = np.zeros(len(groups) + 1, dtype=np.int64)
        np.cumsum([len(g) for g in groups], out=ptr[1:])
        data = format_json_rows(values[flat], ptr)
        with outs.open(out) as f:
            f.write(data)
        outs.commit()
    rep.say(f"wrote {display_name(output, output=True)} in {rep.lap():.2f}s")


add_version(find_all_command, "simhash-find-all")
add_version(find_clusters_command, "simhash-find-clusters")


def find_all_main(argv: list[str] | None = None) -> None:
    run(find_all_command, "simhash-find-all", argv)


def find_clusters_main(argv: list[str] | None = None) -> None:
    run(find_clusters_command, "simhash-find-clusters", argv)
