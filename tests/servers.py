"""Real redis-server processes (single node and a 3-node cluster) and real ``neardup serve``
processes on free localhost ports, for the service and Redis backend tests."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REDIS_SERVER = shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli")

needs_redis = pytest.mark.skipif(
    REDIS_SERVER is None or REDIS_CLI is None,
    reason="redis-server is not installed (apt-get install redis-server)",
)


@contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``"64k"``, ``"3m"``) mounted at the new directory ``where``: a real
    disk that fills up. Skips the test where mounting is not allowed (it needs root)."""
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                       capture_output=True)  # fmt: skip
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fresh_name(url: str, prefix: str) -> str:
    """``url`` naming a new index of its own (``?name=`` a random name starting with
    ``prefix``), so tests on one server never meet each other's keys."""
    return f"{url}?name={prefix}{uuid.uuid4().hex[:12]}"


def free_port(cluster: bool = False) -> int:
    """A free localhost port; for a cluster node also ``port + 10000`` (its bus) is free."""
    if not cluster:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    rng = random.Random()
    while True:
        port = rng.randrange(20000, 45000)
        try:
            for p in (port, port + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue


def wait_for(check, timeout: float = 20.0, what: str = "a server") -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not come up in {timeout} s")
        time.sleep(0.05)


class RedisNode:
    """One redis-server on a free port, persisting to ``directory`` (AOF, fsync every write)."""

    def __init__(
        self,
        directory,
        cluster: bool = False,
        port: int | None = None,
        extra: tuple[str, ...] = (),
        password: str | None = None,
    ) -> None:
        self.extra = tuple(extra)
        self.password = password
        self.dir = str(directory)
        os.makedirs(self.dir, exist_ok=True)
        self.port = port or free_port(cluster)
        self.cluster = cluster
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        args = [
            REDIS_SERVER,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", self.dir,
            "--appendonly", "yes",
            "--appendfsync", "always",
            "--save", "",
            "--daemonize", "no",
            "--logfile", os.path.join(self.dir, "redis.log"),
        ]  # fmt: skip
        args += list(self.extra)
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
            args += ["--cluster-node-timeout", "2000"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: self.cli("ping") == "PONG", what=f"redis-server on {self.port}")

    def cli(self, *args: str) -> str:
        auth = ["-a", self.password, "--no-auth-warning"] if self.password else []
        out = subprocess.run(
            [REDIS_CLI, "-p", str(self.port), *auth, *args],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


class RedisCluster3:
    """Three cluster-enabled redis-server processes joined with ``redis-cli --cluster create``."""

    def __init__(self, directory) -> None:
        self.nodes = [RedisNode(os.path.join(str(directory), f"n{i}"), True) for i in range(3)]
        subprocess.run(
            [REDIS_CLI, "--cluster", "create"]
            + [f"127.0.0.1:{n.port}" for n in self.nodes]
            + ["--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        wait_for(
            lambda: all("cluster_state:ok" in n.cli("cluster", "info") for n in self.nodes),
            what="the Redis cluster",
        )

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()


class Service:
    """``neardup serve`` in its own process on a free port."""

    def __init__(self, index: str, *args: str, env: dict | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        code = "import sys; from neardup.cli.main import main; main(sys.argv[1:])"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, "serve", index, "--port", str(self.port), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        import httpx

        def up() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(self.proc.stdout.read().decode())
            return httpx.get(self.url + "/health", timeout=1).status_code in (200, 503)

        deadline = time.monotonic() + 180  # a loaded CI machine starts workers slowly
        while True:
            try:
                if up():
                    break
            except RuntimeError:
                raise
            except Exception:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("neardup serve did not start")
            time.sleep(0.1)

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.stdout.read().decode(errors="replace")
