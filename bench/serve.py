"""Load test of ``neardup serve``: HTTP against in-process, local index against Redis.

For each backend (a local index directory; Redis on one node; a 3-node Redis Cluster, all on
127.0.0.1 with ``appendonly yes``/``appendfsync always``) it indexes N random fingerprints (Redis:
one bulk ``add``, timed, with the client's and the servers' CPU seconds), then measures, in
process (``Index.query_arrays``) and over HTTP (a real ``neardup serve`` process): single-query
p50/p99 latency, back to back, and batch throughput. Queries: half are indexed fingerprints with
up to k bit flips, half random. Answers over HTTP are checked against the in-process ones.

The HTTP client is the standard library's keep-alive ``http.client`` (about 0.1 ms of CPU per
request; httpx spends about 0.5 ms, on the same cores as the server). The server's CPU time per
single query is read from /proc, and a ``floor`` row runs the same client against a bare uvicorn
app that answers a constant, taking turns with each service's single queries (four rounds each):
the latency this machine gives any HTTP round trip at the same moments (on a shared machine its
p99 is scheduling delay, not work).

``--load`` instead holds a local index under load (``--workers`` processes, default 2): p50/p99
of single queries from 8 concurrent clients, batch throughput, the same while a writer adds
1,000 fingerprints/s (``/add`` of 100 every 0.1 s), then a ``kill -9`` of every server process
mid-load; after a restart every acknowledged write must be answered (checked against a model
of the acknowledged ids) and the index must verify.

Usage::

    python bench/serve.py                                  # N = 10M, distance 3, all backends
    python bench/serve.py --backends redis --sweep 12,14,16,18   # bucket bits on Redis
    python bench/serve.py --load --n 1e6 --seconds 10      # held load and a kill -9
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import psutil

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from servers import RedisCluster3, RedisNode, Service, free_port, wait_for  # noqa: E402

from neardup.core.layout import Layout  # noqa: E402
from neardup.index import Index  # noqa: E402
from neardup.index.redis import RedisIndex, choose_redis_layout  # noqa: E402

# A bare ASGI app answering every request with a constant: the floor of an HTTP round trip.
_FLOOR_APP = r"""
import sys, uvicorn
BODY = b'{"results":[{"matches":[]}],"generation":1}'
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": BODY})
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""


def make_queries(corpus, m, k, rng):
    near = corpus[rng.integers(0, len(corpus), m // 2)]
    for _ in range(k):
        flip = rng.random(len(near)) < 0.7
        bits = np.uint64(1) << rng.integers(0, 64, len(near)).astype(np.uint64)
        near = np.where(flip, near ^ bits, near)
    q = np.concatenate([near, rng.integers(0, 2**64, m - m // 2, dtype=np.uint64)])
    rng.shuffle(q)
    return q


def pct(times):
    t = np.array(times) * 1e3
    return float(np.percentile(t, 50)), float(np.percentile(t, 99))


def cpu_s(pids):
    """User + system CPU seconds of processes ``pids`` and their children."""
    total = 0.0
    for pid in pids:
        p = psutil.Process(pid)
        for q in [p, *p.children(recursive=True)]:
            total += sum(q.cpu_times()[:2])
    return total


def in_process(ix, singles, batches):
    for q in singles[:50]:
        ix.query_arrays([q])
    times = []
    c = time.process_time()
    for q in singles:
        t = time.perf_counter()
        ix.query_arrays([q])
        times.append(time.perf_counter() - t)
    cpu_us = 1e6 * (time.process_time() - c) / len(singles)
    t = time.perf_counter()
    answers = [ix.query_arrays(b) for b in batches]
    rate = sum(len(b) for b in batches) / (time.perf_counter() - t)
    return pct(times), rate, answers, cpu_us


class Client:
    """One keep-alive HTTP/1.1 connection (``http.client``) posting JSON."""

    def __init__(self, port: int, token: str | None = None) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {"Content-Type": "application/json"}
        if token is not None:
            self.headers["Authorization"] = f"Bearer {token}"

    def post(self, path: str, body: bytes) -> bytes:
        self.conn.request("POST", path, body, self.headers)
        r = self.conn.getresponse()
        data = r.read()
        assert r.status == 200, data[:300]
        return data


def singles_over_http(targets, singles, rounds=4):
    """Single queries back to back against each ``(port, pids)`` target, the targets taking
    turns in ``rounds`` rounds (so each sees the machine's load of the same moments): per
    target, its list of request seconds and the servers' CPU µs per request."""
    clients = [Client(port) for port, _ in targets]
    bodies = [json.dumps({"fingerprints": [int(q)]}).encode() for q in singles]
    for c in clients:
        for b in bodies[:100]:
            c.post("/query", b)
    times = [[] for _ in targets]
    cpu = [0.0 for _ in targets]
    for r in range(rounds):
        part = bodies[r::rounds]
        for i, (c, (_, pids)) in enumerate(zip(clients, targets)):
            c0 = cpu_s(pids)
            for b in part:
                t = time.perf_counter()
                c.post("/query", b)
                times[i].append(time.perf_counter() - t)
            cpu[i] += cpu_s(pids) - c0
    return [(t, 1e6 * c / len(bodies)) for t, c in zip(times, cpu)]


def over_http(s, floor_app, singles, batches, answers):
    """(single p50/p99, batch queries/s, server CPU µs per single, floor's single times and CPU)
    of the service ``s``, its single queries taking turns with the floor app's."""
    (times, cpu_us), floor_run = singles_over_http(
        [(s.port, [s.proc.pid]), (floor_app[0], [floor_app[1].pid])], singles
    )
    c = Client(s.port)
    bodies = [json.dumps({"fingerprints": b.tolist()}).encode() for b in batches]
    t = time.perf_counter()
    replies = [json.loads(c.post("/query", body)) for body in bodies]
    rate = sum(len(b) for b in batches) / (time.perf_counter() - t)
    for r, m in zip(replies, answers):
        got = [
            (i, x["id"], x["distance"])
            for i, res in enumerate(r["results"])
            for x in res["matches"]
        ]
        want = list(zip(m.query_index.tolist(), m.id.tolist(), m.distance.tolist()))
        assert got == want, "HTTP answers differ from in-process answers"
    return pct(times), rate, cpu_us, floor_run


def start_floor():
    """(port, process) of the bare app."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", _FLOOR_APP, str(port)])
    wait_for(lambda: Client(port).post("/query", b"{}") is not None, what="the floor app")
    return port, proc


def load_redis(url, corpus, nodes, **create):
    """Create the index and add the corpus in one bulk add: (index, wall s, client CPU s,
    Redis CPU s)."""
    ix = RedisIndex.create(url, **create)
    pids = [x.proc.pid for x in nodes]
    s0, c0, t = cpu_s(pids), time.process_time(), time.perf_counter()
    ix.add(corpus, ids=np.arange(len(corpus)))
    wall = time.perf_counter() - t
    return ix, wall, time.process_time() - c0, cpu_s(pids) - s0


def used_memory(nodes):
    return sum(int(x.cli("info", "memory").split("used_memory:")[1].split()[0]) for x in nodes)


def sweep(args, corpus, singles, batches, tmp):
    """Redis, one node: bulk load, memory and query speed per bucket size."""
    n, k = len(corpus), args.distance
    node = RedisNode(os.path.join(tmp, "sweep"))
    node.cli("config", "set", "appendfsync", "everysec")
    print("| blocks (tables) | bucket bits | records/bucket | single p50 ms | single p99 ms | batch q/s | "
          "Redis B/fp | load fp/s | load CPU s (client + Redis) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    try:
        for bits in [int(b) for b in args.sweep.split(",")]:
            node.cli("flushall")
            # the automatic blocks, or the fewest whose shortest table prefix holds the bits
            blocks = choose_redis_layout(n, k)[0]
            while min(t.prefix_bits for t in Layout(blocks, k).tables) < bits:
                blocks += 1
            ix, wall, ccpu, scpu = load_redis(
                node.url + "?name=sweep", corpus, [node], distance=k, blocks=blocks,
                expected_size=n, bucket_bits=bits,
            )  # fmt: skip
            (p50, p99), rate, _, _ = in_process(ix, singles, batches[:2])
            print(
                f"| {blocks} ({ix.layout.n_tables}) | {bits} | {n / 2**bits:,.0f} | {p50:.3f} | {p99:.3f} | {rate:,.0f} | "
                f"{used_memory([node]) / n:.0f} | {n / wall:,.0f} | {ccpu:.1f} + {scpu:.1f} |",
                flush=True,
            )
            ix.close()
    finally:
        node.stop()


TOKEN = "bench-token"


def query_clients(port, singles, batches, seconds, clients=8):
    """``clients`` threads, each on its own keep-alive connection, for ``seconds``: the first
    ``clients - 1`` send single queries, the last batches. Returns (single request seconds,
    batch queries/s)."""
    times, batched, stop = [], [0, 0.0], time.perf_counter() + seconds
    bodies = [json.dumps({"fingerprints": [int(q)]}).encode() for q in singles]
    big = [json.dumps({"fingerprints": b.tolist()}).encode() for b in batches]
    errors = []

    def single(i):
        c, mine = Client(port), []
        try:
            while time.perf_counter() < stop:
                t = time.perf_counter()
                c.post("/query", bodies[i % len(bodies)])
                mine.append(time.perf_counter() - t)
                i += clients
        except Exception as e:  # a failed request fails the run
            errors.append(e)
        times.extend(mine)

    def batch():
        c, t0, j = Client(port), time.perf_counter(), 0
        try:
            while time.perf_counter() < stop:
                c.post("/query", big[j % len(big)])
                batched[0] += len(batches[j % len(big)])
                j += 1
        except Exception as e:
            errors.append(e)
        batched[1] = time.perf_counter() - t0

    threads = [threading.Thread(target=single, args=(i,)) for i in range(clients - 1)]
    threads.append(threading.Thread(target=batch))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return times, batched[0] / max(batched[1], 1e-9)


class Writer(threading.Thread):
    """Adds ``rate`` random fingerprints/s under ids from ``start``: every 0.1 s (or as soon as
    the last ``/add`` is answered, if that took longer) one ``/add`` of what the rate owes
    since the start. ``acked`` maps each acknowledged id to its fingerprint (the model)."""

    def __init__(self, port, rate, start, rng):
        super().__init__(daemon=True)
        self.port, self.rate, self.next_id, self.rng = port, rate, start, rng
        self.acked, self.latency, self.failed, self.sent = {}, [], 0, 0
        self.halt = threading.Event()

    def run(self):
        c, t0 = Client(self.port, TOKEN), time.perf_counter()
        while not self.halt.is_set():
            t = time.perf_counter()
            step = int(min(10_000, max(1, self.rate * (t - t0) - self.sent)))
            fps = self.rng.integers(0, 2**64, step, dtype=np.uint64).tolist()
            ids = list(range(self.next_id, self.next_id + step))
            body = json.dumps({"fingerprints": fps, "ids": ids}).encode()
            try:
                c.post("/add", body)
            except Exception:  # not acknowledged (the server was killed): not in the model
                self.failed += 1
                c = Client(self.port, TOKEN)
                time.sleep(0.05)
                continue
            self.latency.append(time.perf_counter() - t)
            self.acked.update(zip(ids, fps))
            self.next_id += step
            self.sent += step
            time.sleep(max(0.0, 0.1 - (time.perf_counter() - t)))


def kill_all(proc):
    """SIGKILL the server and its workers at once (no shutdown of any kind)."""
    procs = [psutil.Process(proc.pid)] + psutil.Process(proc.pid).children(recursive=True)
    for p in procs:
        p.send_signal(signal.SIGKILL)
    proc.wait()


def check_model(port, acked):
    """Every acknowledged id is answered at distance 0 for its fingerprint: (checked, lost)."""
    c, items, lost = Client(port), sorted(acked.items()), 0
    for a in range(0, len(items), 5000):
        part = items[a : a + 5000]
        body = json.dumps({"fingerprints": [fp for _, fp in part], "distance": 0}).encode()
        res = json.loads(c.post("/query", body))["results"]
        for (i, _), r in zip(part, res):
            lost += i not in {m["id"] for m in r["matches"]}
    return len(items), lost


def load_test(args) -> None:
    """The ``--load`` run (see the module's docstring)."""
    n, k, secs = int(args.n), args.distance, args.seconds
    rng = np.random.default_rng(0)
    corpus = rng.integers(0, 2**64, n, dtype=np.uint64)
    singles = make_queries(corpus, args.singles, k, rng)
    batches = [make_queries(corpus, args.batch, k, rng) for _ in range(args.batches)]
    tmp = tempfile.mkdtemp(prefix="neardup-serve-load-")
    loc = os.path.join(tmp, "ix")
    try:
        with Index.create(loc, distance=k, expected_size=n) as ix:
            ix.add(corpus)
        workers = ["--workers", str(args.workers)]
        s = Service(loc, *workers, env={"NEARDUP_TOKEN": TOKEN})
        try:
            query_clients(s.port, singles[:200], batches[:1], 2)  # warm up every worker
            times, rate = query_clients(s.port, singles, batches, secs)
            report("8 clients, reads only", times, rate)
            w = Writer(s.port, 1000, 10**12, rng)
            w.start()
            times, rate = query_clients(s.port, singles, batches, secs)
            report("8 clients + writer 1,000 fp/s", times, rate, w)
            killer = threading.Timer(secs / 2, kill_all, args=(s.proc,))
            killer.start()
            try:
                query_clients(s.port, singles, batches, secs)
            except Exception:
                pass  # the clients' requests fail once the server is gone
            killer.join()
            w.halt.set()
            w.join()
        finally:
            s.stop()
        s = Service(loc, *workers, env={"NEARDUP_TOKEN": TOKEN})
        try:
            checked, lost = check_model(s.port, w.acked)
        finally:
            s.stop()
        with Index.open(loc) as ix:
            ix.verify()
            size = len(ix)
        print(f"kill -9 of {args.workers + 1} server processes mid-load: {checked:,} acknowledged "
              f"writes checked, {lost} lost; {w.failed} writes unacknowledged; index verified, "
              f"{size:,} entries")  # fmt: skip
        assert lost == 0, "an acknowledged write was lost"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"N = {n:,}, distance {k}, {args.workers} workers, {secs:g} s per phase; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")  # fmt: skip


def report(what, times, rate, writer=None):
    p50, p99 = pct(times)
    line = (f"{what}: single queries p50 {p50:.2f} ms, p99 {p99:.2f} ms "
            f"({len(times):,} requests); batch {rate:,.0f} queries/s")  # fmt: skip
    if writer is not None and writer.latency:
        w50, w99 = pct(writer.latency)
        line += (f"; writer {len(writer.acked):,} fp acknowledged in {len(writer.latency):,} "
                 f"/add calls, p50 {w50:.1f} ms, p99 {w99:.1f} ms")  # fmt: skip
    print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=float, default=1e7)
    ap.add_argument("--distance", type=int, default=3)
    ap.add_argument("--singles", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--backends", default="local,redis,cluster")
    ap.add_argument("--workers", type=int, default=None, help="default: 1 (2 with --load)")
    ap.add_argument("--load", action="store_true", help="held load and a kill -9 (local index)")
    ap.add_argument("--seconds", type=float, default=20.0, help="--load: seconds per phase")
    ap.add_argument(
        "--sweep",
        metavar="BITS,...",
        help="Redis, one node: bulk load, memory and query speed for these bucket bits",
    )
    args = ap.parse_args()
    if args.load:
        args.workers = 2 if args.workers is None else args.workers
        load_test(args)
        return
    args.workers = 1 if args.workers is None else args.workers
    n, k = int(args.n), args.distance
    rng = np.random.default_rng(0)
    corpus = rng.integers(0, 2**64, n, dtype=np.uint64)
    singles = make_queries(corpus, args.singles, k, rng)
    batches = [make_queries(corpus, args.batch, k, rng) for _ in range(args.batches)]
    tmp = tempfile.mkdtemp(prefix="neardup-serve-bench-")
    rows, loads, stop_all = [], [], []
    try:
        if args.sweep:
            sweep(args, corpus, singles, batches, tmp)
            return
        floor_app = start_floor()
        stop_all.append(floor_app[1].terminate)
        floor_times, floor_cpu = [], []
        for backend in args.backends.split(","):
            stop = []
            if backend == "local":
                loc = os.path.join(tmp, "ix")
                t = time.perf_counter()
                with Index.create(loc, distance=k, expected_size=n) as ix:
                    ix.add(corpus)
                load = time.perf_counter() - t
                ix = Index.open(loc)
                layout = f"{ix.blocks} blocks"
                loads.append(f"local: built in {load:.1f} s ({layout})")
            else:
                if backend == "redis":
                    node = RedisNode(os.path.join(tmp, "redis"))
                    stop.append(node.stop)
                    url, nodes = node.url + "?name=bench", [node]
                else:
                    cl = RedisCluster3(os.path.join(tmp, "cluster"))
                    stop.append(cl.stop)
                    url, nodes = cl.url + "?name=bench", cl.nodes
                # bulk load with fsync once a second, then measure with fsync on every write
                for x in nodes:
                    x.cli("config", "set", "appendfsync", "everysec")
                ix, load, ccpu, scpu = load_redis(url, corpus, nodes, distance=k, expected_size=n)
                for x in nodes:
                    x.cli("config", "set", "appendfsync", "always")
                loc = url
                layout = f"{ix.blocks} blocks, {ix.bucket_bits} bucket bits"
                loads.append(
                    f"{backend}: loaded in {load:.1f} s = {n / load:,.0f} fp/s ({layout}); CPU "
                    f"{ccpu:.1f} s client + {scpu:.1f} s Redis = {n / (ccpu + scpu):,.0f} fp "
                    f"per CPU s; Redis memory {used_memory(nodes) / n:.0f} B/fp"
                )
            print(loads[-1], flush=True)
            try:
                (p50, p99), rate, answers, cpu_us = in_process(ix, singles, batches)
                rows.append((backend, "in process", p50, p99, rate, cpu_us))
                print(rows[-1], flush=True)
                s = Service(loc, "--workers", str(args.workers))
                try:
                    (h50, h99), hrate, hcpu, (ft, fc) = over_http(
                        s, floor_app, singles, batches, answers
                    )
                    floor_times += ft
                    floor_cpu.append(fc)
                finally:
                    s.stop()
                rows.append((backend, f"HTTP ({args.workers} worker)", h50, h99, hrate, hcpu))
                print(rows[-1], flush=True)
            finally:
                ix.close()
                for f in stop:
                    f()
        (f50, f99) = pct(floor_times)
        rows.append(("floor: bare uvicorn app", "HTTP", f50, f99, None, np.mean(floor_cpu)))
    finally:
        for f in stop_all:
            f()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nN = {n:,}, distance {k}, {args.singles} single queries back to back, "
          f"{args.batches} batches of {args.batch}; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")  # fmt: skip
    for line in loads:
        print(line)
    print("| backend | path | single p50 ms | single p99 ms | CPU µs per single (serving process) | "
          "batch queries/s |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|")
    for b, path, p50, p99, rate, cpu in rows:
        r = "" if rate is None else f"{rate:,.0f}"
        print(f"| {b} | {path} | {p50:.3f} | {p99:.3f} | {cpu:.0f} | {r} |")


if __name__ == "__main__":
    main()
