"""What a rerun trusts in a dedup run's work directory (:mod:`neardup.pipeline.staged`).

Each finished task leaves ``done.json``, its completion record, written last::

    {"result": <the task's JSON result>,
     "files": {"<name>": [<bytes>, <CRC-32 or null>], ...}}

with the size and the CRC-32 (:func:`zlib.crc32`, streamed) of every file the task wrote (names
relative to the task's directory; the CRC only in a kept work directory, which a later run may
resume). Before a rerun trusts a finished task, :func:`check_task` compares each of its files
with that record, so a file missing, cut short, emptied or with changed bytes is an error naming
it (:func:`neardup.errors.damaged`), never taken as the task's output. Every JSON file of the
work directory (the manifest, the completion records, the index check's entries) is read by
:func:`read_json`, which refuses anything of another shape in one line. :func:`locked` keeps a second run out of a work
directory while one uses it.

A work directory may also be a prefix of object storage (any fsspec URL, :mod:`neardup.io.objects`):
a task's files are put there once it has written them, its completion record last
(:func:`publish_task`; each object whole, nothing renamed), and a rerun trusts a task whose
record is there and whose files have the sizes it recorded (one listing; their CRC-32 is not
read back, which would download them). Two runs on one such prefix are not kept apart: object
storage has no lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from neardup.errors import InputError, damaged, reading_back, temp_dir_error
from neardup.io import objects
from neardup.io.display import size
from neardup.io.files import file_stamp, is_url
from neardup.io.leftovers import TEMP_SUFFIX, remove_leftovers, temp_prefix
from neardup.pipeline import store
from neardup.pipeline.read_cache import forget, renew

if TYPE_CHECKING:
    from neardup.pipeline.plan import DedupPlan

__all__ = [
    "DONE",
    "LOCK",
    "check_task",
    "check_work_dir",
    "clean_work_dir",
    "finished_names",
    "interrupted_note",
    "kept_tasks",
    "open_work_dir",
    "stage_bytes",
    "work_dir_full",
    "locked",
    "publish_task",
    "read_done",
    "read_json",
    "record_files",
    "replace_files",
    "write_object",
]

DONE = "done.json"  #: a task's completion record, in its directory
LOCK = "neardup.lock"  #: the work directory's lock file (holds the pid of the run)
_CHUNK = 1 << 22


def check_work_dir(path: str | os.PathLike | None) -> None:
    """Refuse, in one line, a work directory given as a URL that cannot hold one: of a scheme
    fsspec only reads (``https://``), or without fsspec or its backend (named). A path of a
    file system (local, or shared by a cluster's workers) or a URL of object storage
    (``s3://bucket/work``) is accepted.

    Examples
    --------
    >>> check_work_dir("/data/work")
    >>> check_work_dir("https://example.com/work")
    Traceback (most recent call last):
    ...
    ValueError: work directory https://example.com/work: a work directory must be writable: https:// is read-only
    """
    if path is None or not objects.is_object_url(path):
        return
    url = os.fspath(path)
    scheme = url.split("://", 1)[0].lower()
    if scheme in objects.READ_ONLY:
        raise ValueError(f"work directory {url}: a work directory must be writable: "
                         f"{scheme}:// is read-only")  # fmt: skip
    objects.object_fs(url)  # fsspec and the scheme's backend installed (else named)


def read_json(path: str, kind: type = dict, fields: Mapping[str, type] | None = None) -> Any:
    """The JSON value in ``path``, a file of a work directory: a ``kind`` (an object, or a
    list), with each of ``fields`` present in the object and of its type; anything else
    (unreadable, not JSON, of another kind, a field missing) is
    :func:`~neardup.errors.damaged`, one line naming the file.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     path = os.path.join(d, "done.json")
    ...     with open(path, "w") as f:
    ...         _ = f.write("[]")
    ...     read_json(path)
    Traceback (most recent call last):
    ...
    neardup.errors.InputError: ...: cannot be read back (a list, not a JSON object): ...
    """
    with reading_back(path):
        if is_url(path):
            found = json.loads(objects.cat(path).decode("utf-8"))
        else:
            with store.open_bytes(path) as f:
                found = json.load(f)
    if not isinstance(found, kind):
        what = "JSON object" if kind is dict else f"JSON {_json_type(kind())}"
        raise damaged(path, f"a {_json_type(found)}, not a {what}")
    for name, kind in (fields or {}).items():
        if not isinstance(found.get(name), kind):
            raise damaged(path, f"no {name!r} of type {kind.__name__}")
    return found


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", int: "number",
             float: "number"}  # fmt: skip
    return "null" if value is None else names.get(type(value), type(value).__name__)


def write_object(path: str, value: Mapping[str, Any]) -> None:
    """``value`` as JSON in ``path``, whole or not at all (a temporary file, synced, renamed;
    a URL: one object, put whole)."""
    if is_url(path):
        objects.put_bytes(path, json.dumps(value).encode("utf-8"))
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _crc(path: str) -> int:
    """CRC-32 of the file at ``path``, read in chunks of 4 MiB."""
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def record_files(directory: str, sums: bool) -> dict[str, list[int | None]]:
    """``{name: [bytes, CRC-32]}`` of every file under ``directory`` (names relative to it,
    its completion record excepted); the CRC None unless ``sums``."""
    out: dict[str, list[int | None]] = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, directory)
            if rel != DONE:
                out[rel] = [os.path.getsize(path), _crc(path) if sums else None]
    return out


def read_done(directory: str) -> dict[str, Any]:
    """The completion record of the task in ``directory``, checked to be one
    (:func:`read_json`; every file entry ``[bytes, CRC-32 or null]``)."""
    path = os.path.join(directory, DONE)
    record = read_json(path, dict, {"files": dict})
    if "result" not in record:
        raise damaged(path, "no 'result'")
    for key in ("files", "was", "moved"):
        for name, entry in record.get(key, {}).items():
            if entry is not None or key != "was":
                _check_entry(path, name, entry)
    return record


def _check_entry(path: str, name: str, entry: Any) -> None:
    def count(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    ok = isinstance(entry, list) and len(entry) == 2
    if not (ok and count(entry[0]) and (entry[1] is None or count(entry[1]))):
        raise damaged(path, f"the entry of {name!r} is not [bytes, CRC-32]")


def check_task(directory: str, record: Mapping[str, Any]) -> None:
    """Every file the task in ``directory`` recorded (``record``, from :func:`read_done`) as
    it was written: present, of its size and (where recorded, on a file system) its CRC-32;
    else :func:`~neardup.errors.damaged` naming the first that is not. A file that a later task
    is putting in its place (:func:`replace_files`) may be either version."""
    found = objects.sizes(directory) if is_url(directory) else None  # one listing
    was = record.get("was", {})
    for name, entry in record["files"].items():
        path = os.path.join(directory, name)
        if name in was and was[name] is None and not _exists(path, found, name):
            continue
        why = _differs(path, entry, found, name)
        if why is not None and not (name in was and _differs(path, was[name], found, name) is None):
            raise damaged(path, why)


def _exists(path: str, found: Mapping[str, int] | None, name: str) -> bool:
    return os.path.exists(path) if found is None else name in found


def _differs(path: str, entry: list[int | None] | None, found: Mapping[str, int] | None = None,
             name: str = "") -> str | None:  # fmt: skip
    """How the file at ``path`` differs from ``[bytes, CRC-32]`` (None: it does not);
    ``found``: the sizes of its task's objects (a work directory on object storage, whose
    files are checked by size)."""
    if entry is None:
        return "a file where none was"
    if found is not None:
        size = found.get(name)
        if size is None:
            return "missing"
        return None if size == entry[0] else f"{size} bytes where its task wrote {entry[0]}"
    with reading_back(path):
        size = os.path.getsize(path)
        if size != entry[0]:
            return f"{size} bytes where its task wrote {entry[0]}"
        if entry[1] is not None and _crc(path) != entry[1]:
            return f"bytes changed since its task wrote them (CRC-32 not {entry[1]:08x})"
    return None


def publish_task(local: str, final: str, record: Mapping[str, Any]) -> None:
    """The files of a finished task, written in the local directory ``local``, put in its
    directory ``final`` on object storage, then its completion ``record`` last: a task whose
    record is there has all its files there (each object whole; none renamed)."""
    names = [name for name in record["files"] if name != DONE]
    objects.put_files([(os.path.join(local, n), f"{final}/{n}") for n in names], final)
    write_object(f"{final}/{DONE}", record)


def replace_files(src: str, dest: str) -> None:
    """The files of the finished task in ``src`` moved over those of the same names of the
    finished task in ``dest`` (the dedup-ids stage's spill without repeated ids, in place of
    the scan's), the completion records following them, so that a run stopped at any point
    finds both tasks whole and completes the move when run again: ``dest`` accepts either
    version while the files move, ``src`` records what it handed over. On object storage a
    file moves as a copy by the store, then the original removed; in a memory store (never
    resumed), the files move."""
    if store.in_memory(src):
        store.move(src, dest)
        return
    new = read_done(src)
    if new["files"]:
        old = read_done(dest)
        was = dict(old.get("was", {}))
        for name in new["files"]:
            was.setdefault(name, old["files"].get(name))
        write_object(os.path.join(dest, DONE),
                     {**old, "files": {**old["files"], **new["files"]}, "was": was})  # fmt: skip
        write_object(os.path.join(src, DONE), {**new, "files": {}, "moved": new["files"]})
    found = objects.sizes(src) if is_url(src) else None
    for name, entry in new.get("moved", new["files"]).items():
        path = os.path.join(src, name)
        if _exists(path, found, name):  # not moved yet: as its task wrote it
            why = _differs(path, entry, found, name)
            if why is not None:
                raise damaged(path, why)
            _move(path, os.path.join(dest, name))
    old = read_done(dest)
    if "was" in old:
        write_object(os.path.join(dest, DONE), {k: v for k, v in old.items() if k != "was"})


def _move(src: str, dest: str) -> None:
    """The file ``src`` renamed ``dest`` (on object storage: copied, then removed)."""
    if not is_url(src):
        os.replace(src, dest)
        return
    objects.copy([(src, dest)], src)
    objects.remove([src], src)


@contextlib.contextmanager
def locked(work: str) -> Iterator[None]:
    """An exclusive, non-blocking ``flock`` on the work directory ``work``'s lock file for the
    block (the file holds this process's id); held by another run: an :class:`InputError`
    naming that run's pid. A work directory on object storage is not locked (it has no
    lock)."""
    import fcntl

    if is_url(work):
        yield
        return

    path = os.path.join(work, LOCK)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise InputError(work, None, f"the work directory is in use by another neardup run "
                         f"(pid {pid}): let it finish, or give another --work-dir") from None  # fmt: skip
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


_MANIFEST = "manifest.json"


#: 2: the scan spills hold their id hashes sorted; 3: bad records in files; 4: each task records
#: its files' sizes and CRC-32, the inputs' stamps hold device, inode and status-change time, the
#: near tasks keep each pair's keep key (ekey), the scan its sets' digests (the exact stage); 5:
#: the common stage its sets' digests too (the exact stage on the sets without common shingles);
#: 6: the prefix candidates' stages; 7: their family links, decided with prefix candidates; 8:
#: prefix entries hold the document's place in its shard (int32), not its global position; 9:
#: the scan's set digests from a compiled kernel (two 64-bit lanes), not BLAKE2b; 10: the lines
#: of a file's byte ranges counted from that file's start (they ran on across files)
_VERSION = 10


def work_dir_full(e: OSError, where: str, nbytes: int) -> OSError:
    """``e``, met in the temporary directory ``where`` that holds a run's work directory
    (``nbytes`` written there so far), as one line (:func:`neardup.errors.temp_dir_error`)."""
    held = f"a dedup keeps its stages' files there ({nbytes} bytes written so far)"
    return temp_dir_error(e, where, held, "a work directory with --work-dir")


@contextlib.contextmanager
def open_work_dir(plan: DedupPlan, stamps: Mapping[str, tuple] | None = None) -> Iterator[str]:
    """The run's work directory: ``plan.work_dir`` (made, or resumed when its manifest is this
    plan's and its inputs' ``stamps`` (:func:`~neardup.io.files.file_stamp`, taken here when
    not given) are those it recorded; refused in one line otherwise), locked for the run
    (:func:`~neardup.pipeline.workdir.locked`: a second run is refused), else a temporary one
    removed at the end (named as :mod:`neardup.io.leftovers` says, so that one left by a run
    killed outright is removed by the next run, or ``neardup clean``)."""
    if plan.work_in_memory:
        with store.memory_store() as root:
            yield root
        return
    if plan.work_dir is None:
        where = plan.temp_dir or tempfile.gettempdir()
        try:
            remove_leftovers(where)  # the work directories of runs killed outright
            work = tempfile.mkdtemp(prefix=temp_prefix("neardup-work"), suffix=TEMP_SUFFIX,
                                    dir=where)  # fmt: skip
        except OSError as e:
            raise work_dir_full(e, where, 0) from e
        try:
            yield work
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    work = plan.work_dir
    if stamps is None:
        stamps = {f.path: file_stamp(f.path) for f in plan.files}
    inputs = json.loads(json.dumps([[p, stamp] for p, stamp in stamps.items()]))
    manifest = {"version": _VERSION, "plan": plan.key(), "inputs": inputs}
    if is_url(work):
        with _object_work_dir(work, manifest):
            yield work
        return
    path = os.path.join(work, _MANIFEST)
    if os.path.isdir(work) and not _ours(work):
        raise _not_ours(work)
    os.makedirs(work, exist_ok=True)
    with locked(work):
        if os.path.exists(path):
            _check_manifest(work, read_json(path), manifest)
            _remove_half_written(work)
        elif set(os.listdir(work)) - {LOCK, f"{_MANIFEST}.tmp"}:
            raise _not_ours(work)
        else:
            write_object(path, manifest)
        yield work


@contextlib.contextmanager
def _object_work_dir(work: str, manifest: dict[str, Any]) -> Iterator[None]:
    """:func:`open_work_dir` for a prefix of object storage (not locked: it has no lock), this
    process's local copies of its files removed at the end
    (:mod:`neardup.pipeline.read_cache`)."""
    objects.writable_root(work, "a work directory")
    names = _top_names(work)
    if _MANIFEST in names:
        _check_manifest(work, read_json(f"{work}/{_MANIFEST}"), manifest)
    elif names:
        raise _not_ours(work)
    else:
        write_object(f"{work}/{_MANIFEST}", manifest)
    renew(work)
    try:
        yield
    finally:
        forget(work)


def _top_names(work: str) -> set[str]:
    """The names right under the prefix ``work`` of object storage (files and prefixes)."""
    return {name.split("/", 1)[0] for name in objects.sizes(work)}


def _ours(work: str) -> bool:
    """Whether the directory ``work`` is empty or holds a work directory's manifest or lock."""
    names = set(os.listdir(work))
    return not names or _MANIFEST in names or LOCK in names


def _not_ours(work: str) -> InputError:
    return InputError(work, None, "is not empty and holds no neardup work: give a new or "
                      "empty --work-dir")  # fmt: skip


def _check_manifest(work: str, found: dict[str, Any], manifest: dict[str, Any]) -> None:
    """Refuse the work directory ``work`` whose manifest ``found`` is not ``manifest``: of
    another format version, of inputs changed since, or of another plan."""
    other = InputError(work, None, "holds the work of a different dedup command: give another "
                       "--work-dir, or remove this one to start over")  # fmt: skip
    if found.get("version") != _VERSION:  # an older neardup's, its stamps of another form
        raise other
    if found.get("inputs") != manifest["inputs"]:
        raise InputError(work, None, "holds work on inputs that changed since: give "
                         "another --work-dir, or remove this one to start over")  # fmt: skip
    if found.get("plan") != manifest["plan"]:
        raise other


def _remove_half_written(work: str) -> None:
    """The task directories a stopped run left half written (``<task>.tmp-<token>``)."""
    for name in os.listdir(work):
        stage = os.path.join(work, name)
        if os.path.isdir(stage):
            for t in os.listdir(stage):
                if ".tmp-" in t:
                    shutil.rmtree(os.path.join(stage, t), ignore_errors=True)


def interrupted_note(plan: DedupPlan) -> str:
    """One line: what a run of ``plan`` stopped by Ctrl-C kept, and how to resume it."""
    work = plan.work_dir
    if work is None:
        return ("nothing is kept (its work directory was temporary); with --work-dir DIR a "
                "run stopped can resume")  # fmt: skip
    manifest = os.path.join(work, _MANIFEST)
    if not (objects.exists(manifest) if is_url(work) else os.path.exists(manifest)):
        return f"nothing is kept in {work} yet"
    return (f"the finished tasks are kept in {work} ({size(_dir_bytes(work))}): run the same "
            "command again, with the same --work-dir, to resume")  # fmt: skip


def clean_work_dir(work: str, stages: Iterable[str]) -> list[str]:
    """Remove what a run wrote in its work directory ``work``: its manifest, lock file and the
    directories of its ``stages``; then ``work`` itself, unless something else is left there
    (not neardup's: kept). Returns the names left, sorted."""
    if is_url(work):
        return _clean_object_work_dir(work, stages)
    for name in sorted(os.listdir(work)):
        path = os.path.join(work, name)
        if name in stages and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif name in (_MANIFEST, _MANIFEST + ".tmp", LOCK) and os.path.isfile(path):
            os.remove(path)
    left = sorted(os.listdir(work))
    if not left:
        os.rmdir(work)
    return left


def _clean_object_work_dir(work: str, stages: Iterable[str]) -> list[str]:
    """:func:`clean_work_dir` for a prefix of object storage."""
    stages, names = set(stages), _top_names(work)
    gone = [f"{work}/{name}" for name in sorted(names & stages)]
    objects.remove(gone, work, recursive=True)
    if _MANIFEST in names:
        objects.remove([f"{work}/{_MANIFEST}"], work)
    return sorted(names - stages - {_MANIFEST})


def kept_tasks(work: str) -> int:
    """The tasks finished in ``work`` (a work directory: each stage a directory of tasks)."""
    if is_url(work):
        return sum(name.count("/") == 2 and name.endswith(f"/{DONE}")
                   for name in objects.sizes(work))  # fmt: skip
    return sum(
        _finished(work, stage, task)
        for stage in os.listdir(work)
        if os.path.isdir(os.path.join(work, stage))
        for task in os.listdir(os.path.join(work, stage))
        if ".tmp-" not in task
    )


def _dir_bytes(path: str) -> int:
    if is_url(path):
        return sum(objects.sizes(path).values())
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def _finished(work: str, stage: str, name: str) -> bool:
    """Whether task ``name`` of ``stage`` finished in ``work`` (by an earlier run: reused)."""
    return os.path.exists(os.path.join(work, stage, name, DONE))


def finished_names(work: str, stage: str, names: Sequence[str]) -> set[str]:
    """The tasks of ``names`` of ``stage`` that finished in ``work`` (on object storage: by one
    listing)."""
    if store.in_memory(work):  # never resumed
        return set()
    if not is_url(work):
        return {name for name in names if _finished(work, stage, name)}
    found = objects.sizes(f"{work}/{stage}")
    return {name for name in names if f"{name}/{DONE}" in found}


def stage_bytes(work: str) -> dict[str, int]:
    """The bytes of each stage's files in the work store ``work``, by stage."""
    if is_url(work) or store.in_memory(work):
        out: dict[str, int] = {}
        found = store.sizes(work) if store.in_memory(work) else objects.sizes(work)
        for name, n in found.items():
            if "/" in name:
                stage = name.split("/", 1)[0]
                out[stage] = out.get(stage, 0) + n
        return dict(sorted(out.items()))
    out = {}
    for stage in sorted(os.listdir(work)):
        root = os.path.join(work, stage)
        if os.path.isdir(root):
            out[stage] = sum(_size(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
    return out


def _size(path: str) -> int:
    """Bytes of the file ``path``; 0 when it went meanwhile (a task of a failed stage still
    renaming its files while the run says what it wrote)."""
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0
