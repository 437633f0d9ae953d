"""The HTML report: its data (clusters file, sample, texts), what the page says, and the page in a
real browser (Debian's headless chromium: no console errors, the search runs, a screenshot)."""

from __future__ import annotations

import fractions
import functools
import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter

import naive
import numpy as np
import pytest
from cli import invoke
from hypothesis import given, settings
from hypothesis import strategies as st

import neardup
from neardup.core.verify import distance_for_threshold
from neardup.errors import InputError
from neardup.pipeline import report
from neardup.pipeline.report import (
    REPORT_LARGEST,
    ReportOutput,
    borderline,
    digest_clusters,
    near_counts,
    read_clusters,
    report_ids,
    sample_clusters,
    summary_from_clusters,
    write_report,
    write_result_report,
)

pytest.importorskip("matplotlib")

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "sample")
CORPUS = os.path.join(SAMPLE, "corpus.jsonl")


@functools.lru_cache(maxsize=1)
def _sample_run() -> tuple[str, str, str]:
    """(directory, clusters file, report) of `neardup dedup --clusters --report` on the sample."""
    d = tempfile.mkdtemp(prefix="neardup-report-")
    clusters, report = os.path.join(d, "clusters.jsonl"), os.path.join(d, "report.html")
    r = invoke("neardup", "dedup", CORPUS, "-o", os.path.join(d, "kept.jsonl"),
               "--clusters", clusters, "--report", report, "-q", text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return d, clusters, report


def test_read_clusters_names_the_bad_line(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text('{"kept": 1, "size": 2, "members": [1, 2], "distances": [0, 3]}\n\n{"kept": 1}\n')
    with pytest.raises(InputError, match=r"c.jsonl:3: missing field 'members'"):
        read_clusters(p)
    p.write_text('{"kept": 1, "members": [1, 2], "distances": [0, 99]}\n')
    with pytest.raises(InputError, match=r":1: 'distances' must be integers from 0 to 64"):
        read_clusters(p)
    p.write_text("[1, 2]\nnot json\n")
    with pytest.raises(InputError, match=r":1: expected a JSON object"):
        read_clusters(p)


def test_borderline_drops_are_the_nearest_the_threshold():
    clusters = [
        {
            "kept": "a",
            "members": ["a", "b", "c"],
            "distances": [0, 9, 2],
            "jaccards": [1, 0.81, 0.95],
        },
        {"kept": "d", "members": ["d", "e"], "distances": [0, 1], "jaccards": [1, 0.8]},
    ]
    assert borderline(clusters, 2) == [(1, 1), (0, 1)]  # Jaccard 0.80, then 0.81
    for c in clusters:
        del c["jaccards"]
    assert borderline(clusters, 2) == [(0, 1), (0, 2)]  # fingerprints only: most bits apart
    assert {"b", "a", "c"} <= report_ids(clusters, [])


def test_sample_is_seeded_and_ids_are_kept_plus_some_dropped():
    clusters = [{"kept": i, "members": list(range(i, i + 6)), "distances": [0] * 6}
                for i in range(0, 600, 6)]  # fmt: skip
    a, b = sample_clusters(clusters, 7, seed=1), sample_clusters(clusters, 7, seed=1)
    assert a == b == sorted(a) and len(set(a)) == 7
    assert sample_clusters(clusters, 7, seed=2) != a
    assert sample_clusters(clusters[:3], 7) == [0, 1, 2]
    assert report_ids(clusters, [0]) == set(range(600))  # few: every text, for the search
    clusters[50]["members"] += [1000, 1001]  # the largest, listed 51st
    clusters[50]["distances"] += [0, 0]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report, "REPORT_EMBED_TEXTS", 100)
        ids = report_ids(clusters, [99])
        embedded = list(digest_clusters(clusters, len(clusters), []).embedded)
    # the largest cluster's kept and first REPORT_EMBED_MEMBERS dropped ones first, then the
    # other 19 largest (by position), and no more than the budget
    assert embedded[:6] == [300, 301, 302, 303, 304, 305] and len(embedded) == 100
    assert embedded[6:] == [x for x in range(600) if x // 6 != 50][:94]
    # and the sampled cluster's kept document and REPORT_MEMBERS = 3 dropped ones
    assert ids == set(embedded) | {594, 595, 596, 597}
    s = summary_from_clusters(clusters[:2], 100)
    assert (s["clusters"], s["dropped"], s["kept"]) == (2, 10, 90)


@pytest.mark.slow
def test_dedup_report_and_report_command_agree(tmp_path):
    d, clusters, report = _sample_run()
    r = invoke("neardup", "report", "--clusters", clusters, CORPUS, "-o", str(tmp_path / "r.html"),
               text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(
        r"neardup report: wrote \S+ \(\d+\.\d kB\): 130 clusters from 1,200 documents, "
        r"30 shown side by side\n",
        r.stderr,
    )
    a, b = open(report, encoding="utf-8").read(), (tmp_path / "r.html").read_text()
    index = re.compile(r'<script type="application/json" id="cluster-index">(.*?)</script>', re.S)
    assert json.loads(index.search(a).group(1)) == json.loads(index.search(b).group(1))
    for page in (a, b):
        assert "<td>174 (14.5%)</td>" in page and "<td>1,026</td>" in page
        assert page.count('<details class="cluster"') == 30
        # the drops nearest the threshold, lowest Jaccard first, each with its diff
        near = re.findall(r'<details class="pair"(?: open)?><summary>.*?Jaccard (0\.\d+)', page)
        assert len(near) == 12 and near == sorted(near) and float(near[0]) >= 0.8
        assert "Verified dedup: a document was dropped when the exact Jaccard" in page
        assert page.count("<svg") == 3  # cluster sizes, distances in bits, Jaccards
        assert "src=" not in page and 'href="http' not in page  # self-contained


def test_page_names_jaccards_when_clusters_carry_them(tmp_path):
    texts = {"a": "the cat sat on the mat", "b": "the cat sat on a mat", "<b>x</b>": "dogs"}
    clusters = [
        {"kept": "a", "size": 2, "members": ["a", "b"], "distances": [0, 4],
         "jaccards": [None, 0.93]},
        {"kept": "<b>x</b>", "size": 2, "members": ["<b>x</b>", "</script><i>"],
         "distances": [0, 2], "jaccards": [None, 0.5]},
    ]  # fmt: skip
    out = tmp_path / "j.html"
    write_report(out, {"documents": 5, "clusters": 2, "dropped": 2}, clusters, texts, [0, 1])
    page = out.read_text()
    assert "Jaccard 0.930" in page and "Similarity of each dropped document" in page
    assert page.count("<svg") == 3
    assert "<b>x</b>" not in page.replace("<script", "")  # ids are escaped in HTML ...
    assert "</script><i>" not in page  # ... and in the embedded JSON
    assert "The text of <code>&lt;/script&gt;&lt;i&gt;</code> was not found" in page


def test_python_api_report_for_in_memory_texts(tmp_path):
    texts = ["the cat sat on the mat today", "The cat sat on the mat today!", "dogs bark"]
    r = neardup.dedup(texts)
    n = write_result_report(tmp_path / "t.html", r, texts)
    page = (tmp_path / "t.html").read_text()
    assert n == len(page.encode()) and "The cat sat on the mat today!" in page


def test_report_of_missing_ids_warns(tmp_path):
    d, clusters, _ = _sample_run()
    other = tmp_path / "other.jsonl"
    other.write_text('{"id": "zz", "text": "nothing here"}\n')
    r = invoke("neardup", "report", "--clusters", clusters, str(other), "-o",
               str(tmp_path / "r.html"), text=True)  # fmt: skip
    assert r.returncode == 0
    assert "sampled documents not found in the input (check --text-field/--id-field)" in r.stderr


# -- kept documents just under the threshold ------------------------------------------------------

_NEAR_SUMMARY = re.compile(
    r'<details class="pair near"(?: open)?><summary>kept <code>(.*?)</code>, nearest '
    r"<code>(.*?)</code>: Jaccard (\d\.\d+)</summary>"
)
_COUNTS_JSON = re.compile(r'<script type="application/json" id="similarity-counts">(.*?)</script>')


def _edited_families(seed: int = 7) -> list[dict[str, str]]:
    """8 texts of 150 random words, each with 11 copies of 1 to 11 words replaced (3-word
    shingles: Jaccard from about 0.96 down to about 0.6), shuffled."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(5000)]
    texts = []
    for _ in range(8):
        base = rng.choice(vocab, 150).tolist()
        texts.append(base)
        for k in range(1, 12):
            v = list(base)
            for p in rng.choice(150, k, replace=False).tolist():
                v[p] = str(rng.choice(vocab))
            texts.append(v)
    order = rng.permutation(len(texts)).tolist()
    sentences = lambda words: ". ".join(" ".join(words[i : i + 10]) for i in range(0, 150, 10))  # noqa: E731
    return [{"id": f"d{i:03d}", "text": sentences(texts[k])} for i, k in enumerate(order)]


def _per_hundredth(sets: list[set], pairs) -> list[int]:
    """Pairs (i, k) counted by the Jaccard of their sets per 0.01 ([k / 100, (k + 1) / 100),
    1.0 in the last), in exact fractions."""
    out = [0] * 100
    for i, k in pairs:
        j = fractions.Fraction(len(sets[i] & sets[k]), len(sets[i] | sets[k]))
        out[min(int(j * 100), 99)] += 1
    return out


@functools.lru_cache(maxsize=1)
def _near_run() -> tuple[str, list[dict[str, str]]]:
    """(report, rows) of `neardup dedup --report` at threshold 0.8 on :func:`_edited_families`,
    with fingerprint candidates (their near misses are those within the distance)."""
    d = tempfile.mkdtemp(prefix="neardup-report-near-")
    rows = _edited_families()
    src, report = os.path.join(d, "docs.jsonl"), os.path.join(d, "r.html")
    with open(src, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    r = invoke("neardup", "dedup", src, "-o", os.path.join(d, "k.jsonl"), "--report", report,
               "--threshold", "0.8", "--candidates", "fingerprint", "-q", text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return report, rows


@pytest.mark.slow
def test_near_misses_in_the_report_match_brute_force():
    """The kept documents nearest the threshold from below, and the counts per 0.01 of drops
    and near misses, as the rule computed here on Python sets gives them."""
    report, rows = _near_run()
    page = open(report, encoding="utf-8").read()
    sets = [set(naive.naive_shingle_keys(r["text"])) for r in rows]
    fps = [naive.set_minhash(s) for s in sets]  # the set fingerprints
    order, dist = list(range(len(rows))), distance_for_threshold(0.8)
    kept_for, jac = naive.decide_verified(sets, fps, 0.8, order, distance=dist)
    near_for, near_jac = naive.near_misses(sets, fps, kept_for, order, distance=dist)
    ranked = sorted((-j, i) for i, j in enumerate(near_jac) if j is not None)
    assert 12 < len(ranked) and -ranked[11][0] < 0.78  # near misses, spread under 0.8
    want = [(rows[i]["id"], rows[near_for[i]]["id"], f"{-j:.3f}") for j, i in ranked[:12]]
    assert _NEAR_SUMMARY.findall(page) == want
    counts = json.loads(_COUNTS_JSON.search(page)[1])
    assert counts["threshold"] == 0.8
    assert counts["kept"] == _per_hundredth(
        sets, [(i, k) for i, k in enumerate(near_for) if k >= 0]
    )
    assert counts["dropped"] == _per_hundredth(
        sets, [(i, k) for i, k in enumerate(kept_for) if k >= 0]
    )
    assert sum(counts["dropped"][:80]) == 0 and sum(counts["kept"][80:]) == 0
    # the first pair's texts side by side: the earlier kept document, then the later one
    first = re.search(r'<details class="pair near" open>.*?</details>', page, re.S)[0]
    assert f"kept: {want[0][1]}</th>" in first and f"kept too: {want[0][0]}</th>" in first
    reached = sum(1 for j in near_jac if j is not None and j >= 0.79)
    assert f"{reached:,} at 0.79" in page


@pytest.mark.slow
def test_near_misses_from_the_python_api(tmp_path):
    """The report as an output of the run has the near misses; one written afterwards from a
    result without them says where they are."""
    rows = _edited_families(seed=3)
    texts = [r["text"] for r in rows]
    plain = neardup.dedup(texts, threshold=0.8)
    out = ReportOutput(tmp_path / "t.html", texts)
    r = neardup.dedup(texts, threshold=0.8, extra_outputs=[out])
    assert plain.verified.near_for is None
    assert r.kept.tolist() == plain.kept.tolist()
    assert np.all(r.verified.near_jaccard[r.verified.near_for >= 0] < 0.8)
    page = (tmp_path / "t.html").read_text()
    pairs = _NEAR_SUMMARY.findall(page)
    assert len(pairs) == 12 and pairs[0][2] == f"{np.nanmax(r.verified.near_jaccard):.3f}"
    write_result_report(tmp_path / "p.html", plain, texts)
    assert (
        "This run did not look for the kept documents nearest" in (tmp_path / "p.html").read_text()
    )


# -- in a browser ---------------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"
)


def _chromium(url: str, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
             *args, url],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@pytest.mark.slow
@needs_chromium
def test_console_errors_are_seen(tmp_path):
    """The check below can fail: a page with a script error shows up in chromium's log."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><p>x</p><script>notDefinedAnywhere();</script>")
    r = _chromium(bad.as_uri(), "--dump-dom")
    assert any("notDefinedAnywhere" in line for line in _console(r.stderr))


@needs_chromium
@pytest.mark.slow
def test_report_renders_in_chromium_without_console_errors(tmp_path):
    _, _, report = _sample_run()
    url = f"file://{os.path.abspath(report)}#q=doc-0001"
    shot = tmp_path / "report.png"
    r = _chromium(url, f"--screenshot={shot}", "--window-size=1280,2000")
    assert _console(r.stderr) == [], r.stderr
    assert shot.exists(), r.stderr
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (1280, 2000)
    assert len(png) > 50_000  # a rendered page, not a blank one
    dom = _chromium(url, "--dump-dom")
    assert _console(dom.stderr) == [], dom.stderr
    # the search ran: members whose id contains doc-0001 are listed with their decision
    assert re.search(r"\d+ clusters? match", dom.stdout)
    rows = re.findall(
        r"<tr><td><code>(doc-0001\d)</code></td><td>(kept|dropped[^<]*)</td>", dom.stdout
    )
    assert rows and all(i.startswith("doc-0001") for i, _ in rows)
    assert np.all([("bits from kept" in d) or d == "kept" for _, d in rows])


# -- documents dropped against an index (--against) -----------------------------------------------

_ROW = re.compile(
    r'<tr><td><code>(.*?)</code></td><td><code>(.*?)</code></td><td class="num">(\d+)</td>'
    r'(?:<td class="num">([\d.]+)</td>|<td></td>)?</tr>'
)
_INDEX_JSON = re.compile(r'<script type="application/json" id="cluster-index">(.*?)</script>', re.S)


@functools.lru_cache(maxsize=2)
def _against_run(sketches: bool) -> tuple[str, str, str, str]:
    """(directory, second dump, clusters file, report) of `neardup dedup --against IX --report`:
    the first 600 documents of the sample in the index, the last 700 checked against it."""
    d = tempfile.mkdtemp(prefix="neardup-report-against-")
    lines = open(CORPUS, encoding="utf-8").read().splitlines(keepends=True)
    d1, d2 = os.path.join(d, "d1.jsonl"), os.path.join(d, "d2.jsonl")
    open(d1, "w", encoding="utf-8").writelines(lines[:600])
    open(d2, "w", encoding="utf-8").writelines(lines[-700:])
    ix = os.path.join(d, "ix")
    create = ["--threshold", "0.8"] if sketches else ["--distance", "6"]
    assert invoke("neardup", "index", "create", ix, *create).returncode == 0
    assert invoke("neardup", "index", "add", ix, d1).returncode == 0
    clusters, report = os.path.join(d, "c.jsonl"), os.path.join(d, "r.html")
    r = invoke("neardup", "dedup", d2, "-o", os.path.join(d, "k.jsonl"), "--against", ix,
               "--clusters", clusters, "--report", report, "-q", text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return d, d2, clusters, report


@pytest.mark.slow
@pytest.mark.parametrize("sketches", [True, False])
def test_report_lists_documents_dropped_against_the_index(tmp_path, sketches):
    d, d2, clusters, report = _against_run(sketches)
    with neardup.Index.open(os.path.join(d, "ix")) as ix:
        a = neardup.dedup(d2, against=ix).against
    ids = [json.loads(x)["id"] for x in open(d2, encoding="utf-8")]
    found = np.flatnonzero(a.found).tolist()
    assert len(found) > 20
    want = {
        (ids[i], a.id[i], int(a.distance[i]), round(float(a.jaccard[i]), 3) if sketches else None)
        for i in found
    }
    page = open(report, encoding="utf-8").read()
    section = page[page.index('<table class="grid" id="index-matches">') :]
    section = section[: section.index("</table>")]
    rows = {(html.unescape(m), html.unescape(e), int(b), float(j) if j else None)
            for m, e, b, j in _ROW.findall(section)}  # fmt: skip
    assert rows == want  # each dropped document, the entry it matched, bits, estimated Jaccard
    assert ("<th>estimated Jaccard</th>" in section) == sketches
    assert f"<th>dropped as seen in the index</th><td>{len(found):,} in " in page
    how = "estimated from the index&#x27;s sketches" if sketches else "not Jaccard-verified"
    assert how in page
    # the search finds them: one entry per index entry, marked as such
    search = [c for c in json.loads(_INDEX_JSON.search(page).group(1)) if c.get("x")]
    assert sorted(
        (m, c["k"], c["d"][k]) for c in search for k, m in enumerate(c["m"]) if k
    ) == sorted((m, e, b) for m, e, b, _ in want)
    # neardup report from the clusters file shows the same documents and search
    out = tmp_path / "r.html"
    r = invoke("neardup", "report", "--clusters", clusters, d2, "-o", str(out), text=True)
    assert r.returncode == 0, r.stderr
    again = out.read_text(encoding="utf-8")
    assert section in again
    assert json.loads(_INDEX_JSON.search(again).group(1)) == json.loads(
        _INDEX_JSON.search(page).group(1)
    )
    assert f"<th>dropped as seen in the index</th><td>{len(found):,}: " in again


def test_index_table_is_cut_but_searchable(tmp_path, monkeypatch):
    from neardup.pipeline import report_html

    _, d2, clusters, _ = _against_run(True)
    monkeypatch.setattr(report_html, "REPORT_INDEX_ROWS", 5)
    out = tmp_path / "r.html"
    assert invoke("neardup", "report", "--clusters", clusters, d2, "-o", str(out)).returncode == 0
    page = out.read_text(encoding="utf-8")
    section = page[page.index('id="index-matches"') :]
    assert len(_ROW.findall(section[: section.index("</table>")])) == 5
    assert re.search(r"First 5 of [\d,]+ shown; the search finds them all", page)


@needs_chromium
@pytest.mark.slow
def test_index_drops_render_and_are_found_in_chromium(tmp_path):
    d, d2, clusters, report = _against_run(True)
    rows = [json.loads(x) for x in open(clusters, encoding="utf-8")]
    row = next(r for r in rows if r.get("index") and r["distances"][1] > 0)
    doc, entry = row["members"][1], row["kept"]
    url = f"file://{os.path.abspath(report)}#q={doc}"
    shot = tmp_path / "against.png"
    r = _chromium(url, f"--screenshot={shot}", "--window-size=1280,2000")
    assert _console(r.stderr) == [], r.stderr
    assert shot.exists() and len(shot.read_bytes()) > 50_000, r.stderr
    dom = _chromium(url, "--dump-dom")
    assert _console(dom.stderr) == [], dom.stderr
    # the search ran: the document is listed as dropped for the index entry, with its figures
    found = re.search(
        rf"<tr><td><code>{doc}</code></td><td>(dropped as seen in the index[^<]*)</td><td>"
        rf"<code>{entry}</code> \(index\)</td>",
        dom.stdout,
    )
    assert found, dom.stdout[:3000]
    assert found.group(1) == (
        f"dropped as seen in the index, {row['distances'][1]} bits from the entry, "
        f"estimated Jaccard {row['jaccards'][1]:.3f}"
    )
    assert 'id="index-matches"' in dom.stdout


_LAYOUT = """<script>
var r = Array.prototype.map.call(document.querySelectorAll('.plot'), function (p) {
  var b = p.getBoundingClientRect(); return [Math.round(b.top), Math.round(b.width)];
});
var pre = document.createElement('pre'); pre.id = 'layout';
pre.textContent = JSON.stringify({plots: r, body: document.body.clientWidth});
document.body.appendChild(pre);
</script></body>"""


@needs_chromium
@pytest.mark.parametrize("width", [1280, 1920])
@pytest.mark.slow
def test_the_plots_share_one_row(tmp_path, width):
    """The three histograms sit side by side at the same size, none stretched to the full
    width (where its fonts grew to three times the others')."""
    _, _, report = _sample_run()
    page = tmp_path / "r.html"
    page.write_text(open(report, encoding="utf-8").read().replace("</body>", _LAYOUT))
    dom = _chromium(page.as_uri(), "--dump-dom", f"--window-size={width},1500")
    assert _console(dom.stderr) == [], dom.stderr
    got = json.loads(html.unescape(re.search(r'<pre id="layout">(.*?)</pre>', dom.stdout)[1]))
    tops, widths = zip(*got["plots"])
    assert len(tops) == 3 and len(set(tops)) == 1, got
    assert max(widths) - min(widths) <= 1 and max(widths) < got["body"] / 2.5, got


@needs_chromium
@pytest.mark.slow
def test_hostile_ids_and_control_characters(tmp_path):
    """An id with <!--<script> leaves the search working; a \\x01 in a text is shown as \\x01;
    a kept id in no cluster is said to be kept, not unknown."""
    evil = "a<!--<script>b"
    base = "one two three four five six seven eight nine ten eleven twelve thirteen"
    rows = [
        {"id": evil, "text": base + " \x01 end"},
        {"id": "copy", "text": base + " \x01 end!"},
        {"id": "alone", "text": "something else entirely, with other words in it"},
    ]
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = tmp_path / "r.html"
    r = invoke("neardup", "dedup", str(src), "-o", str(tmp_path / "k.jsonl"),
               "--report", str(report), "-q", "--threshold", "0.5", text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    page = report.read_text()
    assert "\x01" not in page and "\\x01" in page
    dom = _chromium(f"{report.as_uri()}#q=copy", "--dump-dom")
    assert _console(dom.stderr) == [], dom.stderr
    assert "1 cluster match" in dom.stdout and "a&lt;!--&lt;script&gt;b" in dom.stdout
    dom = _chromium(f"{report.as_uri()}#q=alone", "--dump-dom")
    assert _console(dom.stderr) == [], dom.stderr
    assert "was kept, having no near-duplicate" in dom.stdout


_ID = st.integers(0, 40)


@st.composite
def _clusters(draw):
    out = []
    for _ in range(draw(st.integers(0, 120))):
        members = draw(st.lists(_ID, min_size=2, max_size=50, unique=True))
        d = draw(st.lists(st.integers(0, 12), min_size=len(members), max_size=len(members)))
        c = {"kept": members[0], "members": members, "distances": d}
        if draw(st.booleans()):
            c["jaccards"] = draw(st.lists(st.none() | st.sampled_from([0.5, 0.8, 0.81, 1.0]),
                                          min_size=len(members), max_size=len(members)))  # fmt: skip
        out.append(c)
    return out


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(_clusters(), st.integers(1, 12), st.data())
def test_digest_is_the_ranks_and_counts_of_every_cluster(clusters, n, data):
    """One pass that keeps a bounded part (its ranks cut as it goes) gives what sorting and
    counting the whole list gives."""
    sample = sorted(data.draw(st.sets(st.integers(0, max(0, len(clusters) - 1)), max_size=5))
                    if clusters else [])  # fmt: skip
    d = digest_clusters(iter(clusters), len(clusters), sample, n_borderline=n)
    sizes = [len(c["members"]) for c in clusters]
    order = sorted(range(len(clusters)), key=lambda i: (-sizes[i], i))[:REPORT_LARGEST]
    assert [i for i, _ in d.largest] == order
    scored = []
    for i, c in enumerate(clusters):
        js = c.get("jaccards")
        for k, m in enumerate(c["members"]):
            if m == c["kept"]:
                continue
            if js is not None and js[k] is not None:
                scored.append((float(js[k]), i, k))
            elif js is None:
                scored.append((-float(c["distances"][k]), i, k))
    assert [(i, k) for i, k, _ in d.borderline] == [(i, k) for _, i, k in sorted(scored)[:n]]
    drops = [(c["distances"][k], (c.get("jaccards") or [None] * len(c["members"]))[k])
             for c in clusters for k, m in enumerate(c["members"]) if m != c["kept"]]  # fmt: skip
    assert dict(d.bits) == dict(Counter(b for b, _ in drops))
    jac = [j for _, j in drops if j is not None]
    assert d.drop_hundredths.tolist() == np.bincount(report.hundredths(jac), minlength=100).tolist()
    assert d.min_jaccard == (min(jac) if jac else None)
    assert d.sampled == {i: clusters[i] for i in sample} and d.count == len(clusters)
    every = {m for c in clusters for m in c["members"]}
    budget = data.draw(st.sampled_from([report.REPORT_EMBED_TEXTS, 7, 40]))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report, "REPORT_EMBED_TEXTS", budget)
        embedded = list(digest_clusters(iter(clusters), len(clusters), []).embedded)
    assert set(embedded) <= every and len(embedded) == min(len(every), budget)
    heads = list(dict.fromkeys(x for i in order for x in report.cluster_head(clusters[i])))
    assert embedded[: len(heads)] == heads[:budget]  # the largest clusters' texts first
    with pytest.raises(ValueError, match="were counted"):
        digest_clusters(iter(clusters), len(clusters) + 1, [])


@pytest.mark.slow
def test_report_stays_small_at_100k_drops(tmp_path):
    rng = np.random.default_rng(1)
    clusters = []
    for i in range(50_000):  # 100,000 drops in clusters of 3
        ids = [f"document-{3 * i + k:08d}" for k in range(3)]
        js = [1.0, *np.round(rng.uniform(0.8, 1.0, 2), 6).tolist()]
        clusters.append({"kept": ids[0], "members": ids, "distances": [0, 4, 7], "jaccards": js})
    texts = {c["kept"]: "word " * 400 for c in clusters[:30]}
    kept = [f"kept-{i:08d}" for i in range(100_000)]  # and 100,000 kept ones with a candidate
    pairs = [{"kept": kept[i], "nearest": kept[i - 1], "jaccard": 0.79} for i in range(1, 13)]
    texts.update((k, "word " * 400) for k in kept[:13])
    near = {"threshold": 0.8, "pairs": pairs, **near_counts(rng.uniform(0.5, 0.8, 100_000), 0.8)}
    path = tmp_path / "big.html"
    n = write_report(path, summary_from_clusters(clusters, 300_000), clusters, texts,
                     sample_clusters(clusters, 30), near=near)  # fmt: skip
    assert 1_000_000 < n < 20_000_000
    assert path.read_text().count('<details class="pair near"') == 12


def _template_corpus() -> list[dict[str, str]]:
    """60 pages of one template (a word or two changed each: a range of Jaccards), then 1,700
    families of three near copies of a random text: 5,160 documents in clusters."""
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(20_000)]
    template = rng.choice(words, 80).tolist()
    rows = []
    for p in range(60):
        page = list(template)
        for k in range(p % 2 + 1 if p else 0):  # the first page is the template itself
            page[10 + 20 * k] = f"item{p}x{k}"
        rows.append({"id": f"tpl-{p:03d}", "text": "Template page. " + " ".join(page)})
    for f in range(1_700):
        base = rng.choice(words, 50).tolist()
        changed = [*base[:25], "changed", *base[26:]]
        for k, text in enumerate((base, changed, base[:-1])):
            rows.append({"id": f"doc-{f:04d}-{k}", "text": " ".join(text)})
    return rows


@functools.lru_cache(maxsize=1)
def _large_run() -> tuple[str, list[dict]]:
    """(report, clusters) of `neardup dedup --report --clusters` on :func:`_template_corpus`."""
    d = tempfile.mkdtemp(prefix="neardup-report-large-")
    src, report_path = os.path.join(d, "in.jsonl"), os.path.join(d, "report.html")
    with open(src, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in _template_corpus())
    clusters = os.path.join(d, "clusters.jsonl")
    r = invoke("neardup", "dedup", src, "-o", os.path.join(d, "kept.jsonl"), "--clusters",
               clusters, "--report", report_path, "-q", text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return report_path, read_clusters(clusters)


@pytest.mark.slow
def test_report_shows_the_largest_clusters_texts_past_5000_clustered_documents():
    """More than 5,000 documents in clusters: the largest cluster's texts are still in the
    page (cut, within the budget), its Jaccard range is shown, the page says how many of the
    clusters its search lists have texts, and the settings name the window used."""
    report_path, clusters = _large_run()
    assert sum(len(c["members"]) for c in clusters) > 5_000
    top = max(clusters, key=lambda c: len(c["members"]))
    assert top["kept"] == "tpl-000" and len(top["members"]) > 50
    page = open(report_path, encoding="utf-8").read()
    texts = json.loads(re.search(r'id="cluster-texts">(.*?)</script>', page, re.S)[1])
    largest = json.loads(re.search(r'id="largest-index">(.*?)</script>', page, re.S)[1])
    assert largest[0]["k"] == "tpl-000" and largest[0]["n"] == len(top["members"])
    shown = largest[0]["m"]
    assert len(shown) == 1 + report.REPORT_EMBED_MEMBERS and set(shown) <= set(texts)
    corpus = {r["id"]: r["text"] for r in _template_corpus()}
    assert all(texts[i] == corpus[i][: report.REPORT_EMBED_CHARS] for i in shown)
    assert len(texts) == report.REPORT_EMBED_TEXTS  # the budget, spent
    lo, hi = report.jaccard_range(top)
    assert lo < hi
    row = re.search(r"<tr><td><code>tpl-000</code>(.*?)</tr>", page)[1]
    assert f'<td class="num">{lo:.3f}–{hi:.3f}</td>' in row and "show the texts" in row
    note = re.search(r"Texts are in this page for ([\d,]+) of the ([\d,]+) clusters", page)
    assert note and 0 < int(note[1].replace(",", "")) < int(note[2].replace(",", ""))
    assert int(note[2].replace(",", "")) == len(clusters)
    assert "preset's" not in page and "<th>window</th><td>3</td>" in page


def test_bits_and_counts_have_whole_ticks(tmp_path):
    """Distances of 1 and 2 bits and counts of 1 to 3: no tick at 1.5 or 0.5."""
    clusters = [{"kept": f"k{i}", "members": [f"k{i}", f"d{i}"], "distances": [0, 1 + i % 2]}
                for i in range(5)]  # fmt: skip
    out = tmp_path / "ticks.html"
    write_report(out, summary_from_clusters(clusters, 10), clusters, {}, [])
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", out.read_text())
    numbers = [t.strip() for t in labels if re.fullmatch(r"\s*-?[\d.]+\s*", t)]
    assert numbers and all("." not in t for t in numbers), numbers


@pytest.mark.slow
@needs_chromium
def test_largest_cluster_texts_render_in_chromium():
    """The largest cluster's texts show at once under its table, and another row's link
    shows that cluster's, with no console error."""
    report_path, clusters = _large_run()
    more = max(len(c["members"]) for c in clusters) - 1 - report.REPORT_EMBED_MEMBERS
    dom = _chromium(f"file://{os.path.abspath(report_path)}", "--dump-dom")
    assert _console(dom.stderr) == [], dom.stderr
    start = dom.stdout.index('<div id="largest-texts">')
    section = dom.stdout[start : dom.stdout.index("</div>", start)]
    assert "Texts of the cluster of <code>tpl-000</code>" in section
    assert section.count('<table class="diff">') == report.REPORT_EMBED_MEMBERS
    assert "Template page." in section and f"{more} more dropped documents" in section
    clicked = os.path.join(os.path.dirname(report_path), "clicked.html")
    with open(report_path, encoding="utf-8") as f, open(clicked, "w", encoding="utf-8") as g:
        g.write(f.read().replace("</body>", "<script>document.querySelector("
                                 "'a[data-l=\"1\"]').click();</script></body>"))  # fmt: skip
    dom = _chromium(f"file://{clicked}", "--dump-dom")
    assert _console(dom.stderr) == [], dom.stderr
    assert re.search(r'<div id="largest-texts"><h3>Texts of the cluster of <code>doc-', dom.stdout)


@pytest.mark.slow
@needs_chromium
def test_texts_of_any_cluster_on_demand(tmp_path):
    """A cluster outside the random sample shows its texts from the search."""
    _, _, report = _sample_run()
    page = open(report, encoding="utf-8").read()
    index = json.loads(re.search(r'id="cluster-index">(.*?)</script>', page, re.S)[1])
    texts = json.loads(re.search(r'id="cluster-texts">(.*?)</script>', page, re.S)[1])
    c = next(c for c in index if c["s"] < 0 and "x" not in c)  # not among the sampled
    dropped = next(m for m in c["m"] if m != c["k"])
    assert {str(m) for m in c["m"]} <= set(texts)
    dom = _chromium(f"file://{os.path.abspath(report)}#q={dropped}&texts", "--dump-dom")
    assert _console(dom.stderr) == [], dom.stderr
    assert f"Texts of the cluster of <code>{c['k']}</code>" in dom.stdout
    assert html.escape(texts[c["k"]][:60], quote=False) in dom.stdout


@pytest.mark.slow
@needs_chromium
def test_near_misses_render_in_chromium(tmp_path):
    """The section of kept documents just under the threshold shows its pairs side by side
    (a screenshot of the section alone is not blank), and the similarity chart draws both
    kinds of bars, with no console error."""
    image = pytest.importorskip("matplotlib.image")
    report, _ = _near_run()
    page = open(report, encoding="utf-8").read()
    alone = tmp_path / "alone.html"
    alone.write_text(
        page.replace("</style>", "body>:not(#near-misses){display:none!important}</style>")
    )
    shot = tmp_path / "near.png"
    r = _chromium(alone.as_uri(), f"--screenshot={shot}", "--window-size=1000,700")
    assert _console(r.stderr) == [], r.stderr
    pixels = image.imread(shot)[..., :3]
    ink = (pixels.min(axis=2) < 0.8).mean(axis=1)  # share of non-white pixels, row by row
    assert (ink > 0.02).sum() > 300, "the section shows little: " + str(ink.round(2).tolist())
    dom = _chromium(f"file://{os.path.abspath(report)}", "--dump-dom")
    assert _console(dom.stderr) == [], dom.stderr
    start = dom.stdout.index('<section id="near-misses">')
    section = dom.stdout[start : dom.stdout.index("</section>", start)]
    assert section.count('<details class="pair near"') == 12
    assert section.count('<table class="diff"') == 12 and "kept too: " in section
    assert "Kept documents whose nearest candidate reaches a lower threshold" in section
    assert "kept (nearest candidate)" in dom.stdout  # the chart's legend
