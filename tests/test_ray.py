"""The staged dedup on Ray (``neardup.dedup(..., executor=...)``, ``neardup dedup --ray``): the
same bytes as the one-process run for every shard size, ``--against``, ``--update`` and
``--report`` on Ray, a bad input named in one line, a worker killed mid-stage, an interrupt that
cancels the tasks not started, and a local Ray started for a run and stopped after it. The
tests share one local Ray of 2 CPUs (started once: Ray takes seconds to start), but the last,
whose command starts its own."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import naive
import pytest

pytest.importorskip("ray", reason='the Ray executor needs ray: pip install "neardup[ray]"')

import ray_tasks  # noqa: E402
from cli import interruptible, invoke  # noqa: E402
from test_staged import _MAIN, ROOT, _buckets, _outputs, _read, _write  # noqa: E402

from neardup import dedup  # noqa: E402
from neardup.distributed.ray_executor import RayExecutor, ray_session  # noqa: E402
from neardup.errors import InputError  # noqa: E402
from neardup.io.sources import InputPath  # noqa: E402
from neardup.pipeline.executors import run_task  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*no shingles:UserWarning")


def _pythonpath() -> str:
    """This checkout's package and the tests' task functions (:mod:`ray_tasks`) first, for Ray's
    workers, which take the environment of the process that started Ray."""
    return os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests"),
                            *filter(None, [os.environ.get("PYTHONPATH")])])  # fmt: skip


@pytest.fixture(scope="module")
def executor():
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = _pythonpath()
    try:
        with ray_session("local", 2):
            yield RayExecutor()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _corpus(tmp_path: Path, n: int = 120) -> list[InputPath]:
    _write(tmp_path / "in.jsonl", naive.text_families(n, seed=3, vocab=60, words=(8, 20)))
    return [InputPath(tmp_path / "in.jsonl")]


@pytest.mark.slow
@pytest.mark.parametrize(("shard_docs", "verify"), [(7, True), (40, False), (1000, True)])
def test_same_bytes_as_the_one_process_run(executor, tmp_path, shard_docs, verify):
    src = _corpus(tmp_path)
    one, outs = _outputs(tmp_path, "one"), _outputs(tmp_path, "ray")
    ref = dedup(src, verify=verify, **one)
    with _buckets(16):  # the sharded search too, where there are several shards
        s = dedup(src, verify=verify, executor=executor, shard_docs=shard_docs, collect=False,
                  **outs).summary()  # fmt: skip
    assert _read(outs) == _read(one) and ref.n_dropped > 0
    assert (s["executor"], s["workers"], s["shards"] > 1) == ("ray", 2, shard_docs < 120)


@pytest.mark.slow
def test_in_memory_data_runs_on_ray_as_on_threads(executor):
    """A list of texts on Ray: each scan task is given its shard's rows; the decisions are
    those of this process's threads, with bad texts skipped at the same positions."""
    texts: list = naive.text_families(150, seed=5, vocab=60, words=(8, 20))
    texts[7], texts[90] = None, 12
    bad_here: list = []
    bad_ray: list = []
    here = dedup(texts, skip_bad=True, on_bad=bad_here.append, shard_docs=20)
    got = dedup(texts, skip_bad=True, on_bad=bad_ray.append, shard_docs=20, executor=executor)
    assert got.kept.tolist() == here.kept.tolist() and here.n_dropped > 0
    assert got.labels.tolist() == here.labels.tolist()
    assert (
        got.positions.tolist()
        == here.positions.tolist()
        == [i for i in range(150) if i not in (7, 90)]
    )
    assert [str(e) for e in bad_ray] == [str(e) for e in bad_here] and len(bad_here) == 2


@pytest.mark.slow
def test_against_update_and_report_on_the_command_line(executor, tmp_path):
    pytest.importorskip("matplotlib")
    from neardup.index import Index

    docs = naive.text_families(90, seed=5, vocab=60, words=(8, 20))
    _write(tmp_path / "old.jsonl", docs[:50], [f"o{i}" for i in range(50)])
    _write(tmp_path / "in.jsonl", docs[30:])
    said, sizes = {}, {}
    for tag, extra in (("one", []), ("ray", ["--ray", "auto", "--shard-docs", "9"])):
        ix = str(tmp_path / f"ix-{tag}")
        assert invoke("neardup", "index", "create", ix, "--threshold", "0.8").returncode == 0
        r = invoke("neardup", "dedup", str(tmp_path / "old.jsonl"), "-o",
                   str(tmp_path / f"old-{tag}.jsonl"), "--against", ix, "--update", "-q")  # fmt: skip
        assert r.returncode == 0, r.stderr
        r = invoke("neardup", "dedup", str(tmp_path / "in.jsonl"), "-o",
                   str(tmp_path / f"{tag}.jsonl"), "--clusters", str(tmp_path / f"{tag}.cl"),
                   "--against", ix, "--update", "--report", str(tmp_path / f"{tag}.html"),
                   "--progress", "none", *extra, text=True)  # fmt: skip
        assert r.returncode == 0, r.stderr
        said[tag] = r.stderr
        with Index.open(ix) as opened:
            sizes[tag] = (len(opened), opened.contains([f"d{i}" for i in range(60)]).tolist())
    for ext in (".jsonl", ".cl"):
        assert (tmp_path / f"ray{ext}").read_bytes() == (tmp_path / f"one{ext}").read_bytes()
    assert sizes["ray"] == sizes["one"]
    assert (tmp_path / "ray.html").stat().st_size > 0
    assert "on Ray (2 CPUs)" in said["ray"] and "documents dropped as seen in" in said["ray"]
    assert "on Ray (this process's connection, 2 CPUs): start-up" in said["ray"]


def test_a_bad_record_and_a_task_s_input_error_are_one_line(executor, tmp_path):
    src = _corpus(tmp_path, 30)
    with open(tmp_path / "in.jsonl", "a") as f:
        f.write('{"id": "bad", "text": \n')
    r = invoke("neardup", "dedup", str(src[0]), "-o", str(tmp_path / "out.jsonl"), "--ray",
               "auto", "--shard-docs", "10", "-q", text=True)  # fmt: skip
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "in.jsonl:31: " in r.stderr and not (tmp_path / "out.jsonl").exists()
    # an input error raised in a task comes back as the same error, not Ray's
    tasks = [(str(tmp_path / "w"), "s", str(i), ray_tasks.bad_line, i) for i in range(4)]
    with pytest.raises(InputError) as e:
        executor.map(run_task, tasks, "s")
    assert str(e.value) == "in.jsonl:7: invalid JSON" and e.value.line == 7
    assert e.value.__cause__ is None and e.value.__suppress_context__
    assert not glob.glob(str(tmp_path / "w" / "s" / "2*"))  # its half-written directory removed


class _KilledOnce:
    """The module's Ray executor, whose first task of ``stage`` writes its process id to
    ``marks/pid`` and sleeps until killed (:func:`ray_tasks.pauses_once`)."""

    def __init__(self, inner: RayExecutor, marks: str, stage: str) -> None:
        self.inner, self.marks, self.stage = inner, marks, stage
        self.name, self.threads, self.workers = inner.name, inner.threads, inner.workers
        self.slots, self.parallel = inner.slots, inner.parallel

    def map(self, fn, tasks, stage, progress=None, memory=None):
        if stage == self.stage:
            fn, tasks = ray_tasks.pauses_once, [(self.marks, fn, *args) for args in tasks]
        return self.inner.map(fn, tasks, stage, progress, memory=memory)


def _kill_when_marked(marks: Path, killed: list[int]) -> None:
    """SIGKILL the process whose id ``marks/pid`` gets (within 120 s)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        text = (marks / "pid").read_text() if (marks / "pid").exists() else ""
        if text:
            os.kill(int(text), signal.SIGKILL)
            killed.append(int(text))
            return
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["scan", "write"])
def test_a_worker_killed_mid_stage_ends_with_the_same_bytes(executor, tmp_path, stage):
    src = _corpus(tmp_path)
    one, outs = _outputs(tmp_path, "one"), _outputs(tmp_path, "ray")
    dedup(src, **one)
    marks = tmp_path / "marks"
    marks.mkdir()
    killed: list[int] = []
    watch = threading.Thread(target=_kill_when_marked, args=(marks, killed), daemon=True)
    watch.start()
    got = dedup(src, executor=_KilledOnce(executor, str(marks), stage), shard_docs=20, **outs)
    watch.join(timeout=10)
    assert killed, "no task of the stage ran"
    with pytest.raises(ProcessLookupError):
        os.kill(killed[0], 0)  # that worker is gone: its task ran again elsewhere
    assert _read(outs) == _read(one) and got.n_dropped > 0


@pytest.mark.slow
def test_an_interrupt_cancels_the_tasks_not_started(executor, tmp_path):
    def progress(stage: str, done: int, total: int) -> None:
        if done:  # Ctrl-C, once the first task is done, another running until it is seen
            (tmp_path / "interrupted").touch()
            raise KeyboardInterrupt

    tasks = [(str(tmp_path), i) for i in range(12)]
    with pytest.raises(KeyboardInterrupt):
        executor.map(ray_tasks.sleepy, tasks, "sleepy", progress)
    started = sorted(p.name for p in tmp_path.glob("started-*"))
    done = sorted(p.name for p in tmp_path.glob("done-*"))
    # a task running at the interrupt is asked to stop (Ray interrupts it as by Ctrl-C; on a
    # loaded machine it may end first) and waited for: once map has returned, none starts or
    # ends (a running task would end 3 s after the interrupt)
    time.sleep(4)
    assert sorted(p.name for p in tmp_path.glob("started-*")) == started and len(started) < 12
    assert sorted(p.name for p in tmp_path.glob("done-*")) == done
    # the cluster is free again: the next stage runs at once
    assert executor.map(ray_tasks.bad_line, [(str(tmp_path), 0)], "next") == [0]


def _ray_processes(session: str) -> list[int]:
    """The processes whose command line names ``session`` (a local Ray's directory)."""
    found = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(cmdline, "rb") as f:
                if session.encode() in f.read():
                    found.append(int(cmdline.split("/")[2]))
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_a_local_ray_stops_with_its_run_interrupted_or_not(tmp_path):
    """``--ray local``: interrupted mid-scan (one line, what the work directory kept), then
    resumed to the one-process run's bytes; each run's Ray and its directory gone after it."""
    src = str(_corpus(tmp_path, 3000)[0])
    work = tmp_path / "work"
    args = [src, "-o", str(tmp_path / "ray.jsonl"), "--ray", "local", "--workers", "2",
            "--shard-docs", "50", "--work-dir", str(work), "--progress", "none"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": _pythonpath()}
    proc = subprocess.Popen([*_MAIN, "dedup", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)  # fmt: skip
    tmp = os.environ.get("TMPDIR", "/tmp")
    sessions: list[str] = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        sessions = sessions or glob.glob(os.path.join(tmp, f".r*.neardup-*-{proc.pid}-*.tmp"))
        if len(glob.glob(str(work / "scan" / "*" / "done.json"))) >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    lines = [x for x in err.splitlines() if x.strip()]
    assert proc.returncode == 130 and len(lines) == 1, err
    assert f"the finished tasks are kept in {work}" in lines[0]
    assert sessions and not os.path.exists(sessions[0]) and not _ray_processes(sessions[0])
    r = subprocess.run([*_MAIN, "dedup", *args], env=env, capture_output=True, text=True,
                       timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "resumed" in r.stderr and "on Ray (2 CPUs)" in r.stderr
    assert "on Ray (local, 2 CPUs): start-up" in r.stderr
    dedup([InputPath(src)], output=tmp_path / "one.jsonl")
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    left = glob.glob(os.path.join(tmp, ".r*.neardup-*.tmp"))  # but the module's own Ray's
    assert not [p for p in left if f"-{os.getpid()}-" not in p and _ray_processes(p)]
