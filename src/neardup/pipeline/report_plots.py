"""The plots of a dedup run's HTML report (:mod:`neardup.pipeline.report_html`): cluster sizes,
each dropped document's distance in bits and its Jaccard per 0.01 beside the kept documents'
nearest misses, drawn by matplotlib as inline SVG (no font or file of their own)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import numpy as np

from neardup._optional import require
from neardup.pipeline.report import ClusterDigest, hundredths

__all__ = ["REPORT_NEAR_WINDOW", "plots"]

#: The chart of drops and near misses per 0.01 of Jaccard starts at most this far under the
#: threshold (lower, where the lowest drop is lower); the kept documents further under it are
#: counted in words.
REPORT_NEAR_WINDOW = 0.2


def _svg(fig: Any) -> str:
    matplotlib = require("matplotlib", "report", "the HTML report")
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "neardup"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _whole_ticks() -> Any:
    """A tick locator that puts ticks on whole numbers only (counts, bits, sizes)."""
    return require("matplotlib.ticker", "report", "the HTML report").MaxNLocator(
        integer=True, min_n_ticks=1
    )


def _bar_plot(x: np.ndarray, y: np.ndarray, xlabel: str, title: str, log_x: bool = False) -> str:
    figure = require("matplotlib.figure", "report", "the HTML report")
    fig = figure.Figure(figsize=(6.4, 3.0))
    ax = fig.add_subplot()
    if log_x:
        ax.step(x, y, where="post", color="#3b6fb6")
        ax.fill_between(x, y, step="post", color="#3b6fb6", alpha=0.35)
        ax.set_xscale("log")
    else:
        whole = bool(len(x)) and np.issubdtype(x.dtype, np.integer)
        ax.bar(x, y, width=0.8 if whole else 0.009, color="#3b6fb6")
        if whole:  # bits and sizes: no tick between two whole numbers
            ax.xaxis.set_major_locator(_whole_ticks())
    ax.yaxis.set_major_locator(_whole_ticks())  # counts of documents or clusters
    ax.set_xlabel(xlabel)
    ax.set_ylabel("documents" if "dropped" in title else "clusters")
    ax.set_title(title, fontsize=11)
    ax.grid(axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def _similarity_plot(digest: ClusterDigest, near: Mapping[str, Any] | None) -> str:
    """Dropped documents (Jaccard with their kept document) and, with ``near``, kept ones
    (with their nearest kept candidate) per 0.01 of Jaccard, the threshold marked."""
    figure = require("matplotlib.figure", "report", "the HTML report")
    d = digest.drop_hundredths
    low = digest.min_jaccard
    lo = int(hundredths([low])[0]) if low is not None else 99
    m = np.zeros(100, dtype=np.int64)
    if near is not None:
        t = near["threshold"]
        m = np.asarray(near["counts"], dtype=np.int64)
        lo = min(lo, int(hundredths([max(t - REPORT_NEAR_WINDOW, 0.0)])[0]))
    x = np.arange(lo, 100) / 100 + 0.005
    fig = figure.Figure(figsize=(6.4, 3.0))
    ax = fig.add_subplot()
    ax.bar(x, d[lo:], width=0.009, color="#3b6fb6", label="dropped")
    if near is not None:
        ax.bar(x, m[lo:], width=0.009, color="#e8853d", label="kept (nearest candidate)")
        ax.axvline(near["threshold"], color="#1d2330", linestyle="--", linewidth=1)
        ax.legend(fontsize=8, frameon=False)
    ax.set_xlabel("Jaccard similarity (bars of 0.01)")
    ax.set_ylabel("documents")
    ax.yaxis.set_major_locator(_whole_ticks())
    title = "Dropped and kept near the threshold" if near is not None else (
        "Similarity of each dropped document")  # fmt: skip
    ax.set_title(title, fontsize=11)
    ax.grid(axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig)


def _counts(counter: Any) -> np.ndarray:
    """A :class:`collections.Counter` of small integers as ``np.bincount`` gives them."""
    out = np.zeros(max(counter) + 1, dtype=np.int64)
    for k, v in counter.items():
        out[k] = v
    return out


def plots(digest: ClusterDigest, near: Mapping[str, Any] | None = None) -> list[str]:
    """The report's plots of ``digest`` (and ``near``, the near misses), as SVG text."""
    plots = []
    if digest.count == 0:
        return plots
    top = max(digest.sizes)
    if top <= 40:
        counts = _counts(digest.sizes)
        xs = np.arange(2, len(counts))
        plots.append(_bar_plot(xs, counts[2:], "documents in the cluster", "Cluster sizes"))
    else:
        edges = np.unique(np.geomspace(2, top + 1, 30).astype(np.int64))
        sizes, weights = zip(*sorted(digest.sizes.items()), strict=True)
        counts, _ = np.histogram(sizes, bins=edges, weights=weights)
        plots.append(
            _bar_plot(
                edges[:-1],
                counts.astype(np.int64),
                "documents in the cluster",
                "Cluster sizes",
                log_x=True,
            )  # fmt: skip
        )
    if digest.bits:
        counts = _counts(digest.bits)
        plots.append(
            _bar_plot(
                np.arange(len(counts)),
                counts,
                "bits from the kept document's fingerprint",
                "Distance of each dropped document",
            )  # fmt: skip
        )
    if digest.drop_jaccards or near is not None:  # per 0.01: how many documents a step moves
        plots.append(_similarity_plot(digest, near))
    return plots
