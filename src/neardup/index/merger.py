"""Merges of a local index's runs in a background thread of its writer.

With :attr:`neardup.index.Index.background_merges` on, :meth:`~neardup.index.Index.add` writes
its rows as a run of their own and returns; this thread then merges runs by the same size-tiered
policy (:func:`neardup.index.writer.merge_range`), while the writer goes on adding and readers
(in this process or others) go on querying the state they hold. A merge writes its run under a
reserved name, then, holding the writer's lock, replaces the runs it read by it in one manifest
switch, if they are unchanged (a run a removal changed meanwhile makes it give up; its files are
deleted and the next add tries again). A crash at any point leaves the last committed state.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from neardup.index import writer

if TYPE_CHECKING:
    from neardup.index.index import Index

__all__ = ["BackgroundMerger"]


class BackgroundMerger:
    """The one merging thread of an index writer (started on demand, ends when no merge is due).

    The writer's ``_writing`` names the segment a merge is writing, so that commits meanwhile
    do not delete its files as unreferenced; ``error`` holds what made a merge fail (raised by
    the writer's next change).
    """

    def __init__(self, ix: Index) -> None:
        self.ix = ix
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.merges = 0
        self._kicked = threading.Event()

    def kick(self) -> None:
        """Merge what is due, in the thread (started if not running)."""
        self._kicked.set()
        with self.ix._wlock:
            if self.thread is not None and self.thread.is_alive():
                return
            self.thread = threading.Thread(target=self._run, name="neardup-index-merge")
            self.thread.daemon = True  # a merge left unfinished at exit is only not committed
            self.thread.start()

    def wait(self) -> None:
        """Until no merge runs."""
        t = self.thread
        if t is not None:
            t.join()

    def _run(self) -> None:
        try:
            while self._kicked.is_set():
                self._kicked.clear()
                while self._merge_one():
                    pass
        except BaseException as e:  # kept for the writer's next change
            self.error = e

    def _merge_one(self) -> bool:
        """Merge the runs due, if any; True when one was committed or given up."""
        ix = self.ix
        with ix._wlock:
            if ix._closed or self.error is not None:
                return False
            segs = list(ix._segs)
            start = writer.merge_range(segs, ix.max_segments, ix.merge_factor)
            if start >= len(segs) - 1:
                return False
            merged = segs[start:]
            deleted = [s.entry.get("deleted") for s in merged]  # (a removal replaces entries)
            name = ix._reserve_name()
            codec = ix.codec
        try:
            rows = writer.gather(merged, ix.id_type, ix.sketch_words)
            runs = merged if codec is None and writer.mergeable(merged) else None
            entry = writer.write_segment(ix.path, ix.layout, name, rows, codec, runs)
            with ix._wlock:
                if ix._closed:
                    return False
                ix._replace_runs(merged, deleted, entry)
                self.merges += 1
        finally:
            ix._writing.discard(name)
        return True
