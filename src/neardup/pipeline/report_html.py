"""One self-contained HTML page for a dedup run: summary, histograms (matplotlib, inline SVG),
the largest clusters, side-by-side diffs (:class:`difflib.HtmlDiff`) of kept and dropped text for
a sample of clusters, the documents dropped as seen in an index (``--against``) with the entry
each matched, and a search over every cluster by id. No external file, script or font."""

from __future__ import annotations

import difflib
import html
import json
import re
from collections.abc import Mapping
from typing import Any

from neardup import config
from neardup.core.bands import candidate_probability
from neardup.io.display import size
from neardup.pipeline.report import (
    REPORT_EMBED_CHARS,
    REPORT_EMBED_MEMBERS,
    REPORT_EMBED_TEXTS,
    REPORT_LARGEST,
    ClusterDigest,
    cluster_head,
    hundredths,
    jaccard_range,
    json_id,
)
from neardup.pipeline.report_plots import REPORT_NEAR_WINDOW
from neardup.pipeline.report_plots import plots as draw_plots
from neardup.pipeline.result import family_note

__all__ = ["render"]


#: Rows of the report's table of documents dropped as seen in an index (``--against``; the
#: search covers them all).
REPORT_INDEX_ROWS = 200

_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_NEXT_CELL = re.compile(r'<t([dh]) class="diff_next"[^>]*>.*?</t\1>', re.S)
_COLGROUPS = re.compile(r"(\s*<colgroup></colgroup>)+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_COLS = '<colgroup><col class="ln"><col class="tx"><col class="ln"><col class="tx"></colgroup>'

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;
max-width:1200px;padding:0 16px;color:#1d2330;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #dde}
h3{font-size:15px;margin:18px 0 6px}h4{font-size:13px;margin:10px 0 4px;font-weight:600}
code{background:#f2f3f7;padding:0 3px;border-radius:3px}
table.grid{border-collapse:collapse;margin:6px 0}table.grid td,table.grid th{border:1px solid #dde;
padding:3px 8px;text-align:left;vertical-align:top}table.grid th{background:#f5f6fa}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(340px,1fr));gap:12px}
.plot{min-width:0}.plot svg{width:100%;max-width:640px;height:auto}.note{color:#667;font-size:13px}
#search{font-size:15px;padding:6px 10px;width:360px;max-width:100%;border:1px solid #99a;
border-radius:4px}#results{margin-top:8px}
table.diff{font:12px/1.35 ui-monospace,Menlo,Consolas,monospace;border-collapse:collapse;
width:100%;table-layout:fixed;margin-bottom:8px}
table.diff td{padding:1px 6px;vertical-align:top;white-space:pre-wrap;overflow-wrap:anywhere}
table.diff col.ln{width:3.2em}table.diff td.diff_header{text-align:right;color:#889;
background:#f7f7fa}table.diff th{background:#eef;text-align:left;padding:2px 6px}
.diff_add{background:#c8f0cc}.diff_chg{background:#fff1a8}.diff_sub{background:#ffc9c9}
details.cluster,details.pair{border:1px solid #dde;border-radius:4px;padding:4px 10px;
margin:8px 0}details.cluster summary,details.pair summary{cursor:pointer;font-weight:600}.hit{outline:3px solid #f5a623}
"""

# Filters the cluster index by id as the user types; "#q=ID" in the address pre-fills it.
_JS = """
(function () {
  var data = JSON.parse(document.getElementById('cluster-index').textContent);
  var box = document.getElementById('search');
  var out = document.getElementById('results');
  var texts = JSON.parse(document.getElementById('cluster-texts').textContent);
  var largest = JSON.parse(document.getElementById('largest-index').textContent);
  var view = document.getElementById('texts'), first = -1, firstHit = -1;
  var largestView = document.getElementById('largest-texts');
  function text(id) {
    var t = texts[id];
    return t == null ? '(text not in this page)' : t;
  }
  // cluster c's kept text beside its dropped ones (the one at hit first), as embedded, in box
  function showTexts(c, hit, box) {
    var k = String(c.k), order = [], parts = [];
    if (hit >= 0 && String(c.m[hit]) !== k) order.push(hit);
    for (var j = 0; j < c.m.length && order.length < MEMBERS; j++) {
      if (j !== hit && String(c.m[j]) !== k) order.push(j);
    }
    order.forEach(function (j) {
      parts.push('<h4>dropped <code>' + esc(c.m[j]) + '</code>: ' + c.d[j] + ' bits' +
        (c.j && c.j[j] != null ? ', Jaccard ' + Number(c.j[j]).toFixed(3) : '') + '</h4>' +
        '<table class="diff"><tr><th>kept: ' + esc(k) + '</th><th>dropped: ' + esc(c.m[j]) +
        '</th></tr><tr><td>' + esc(text(k)) + '</td><td>' + esc(text(c.m[j])) +
        '</td></tr></table>');
    });
    var more = (c.n || c.m.length) - 1 - order.length;
    box.innerHTML = '<h3>Texts of the cluster of <code>' + esc(k) + '</code></h3>' +
      '<p class="note">The first characters of each text, as embedded in this page' +
      (more > 0 ? '; ' + more.toLocaleString('en-US') + ' more dropped documents' : '') +
      '.</p>' + parts.join('');
  }
  var MEMBERS = Number(view.getAttribute('data-members'));
  out.addEventListener('click', function (ev) {
    var a = ev.target.closest('a[data-c]');
    if (!a) return;
    ev.preventDefault();
    showTexts(data[Number(a.getAttribute('data-c'))], Number(a.getAttribute('data-h')), view);
  });
  var table = document.getElementById('largest-table');
  if (table) {
    table.addEventListener('click', function (ev) {
      var a = ev.target.closest('a[data-l]');
      if (!a) return;
      ev.preventDefault();
      showTexts(largest[Number(a.getAttribute('data-l'))], -1, largestView);
    });
  }
  if (largest.length && texts[largest[0].k] != null) showTexts(largest[0], -1, largestView);
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c];
    });
  }
  function show() {
    var q = box.value.trim().toLowerCase();
    if (!q) { out.innerHTML = ''; return; }
    var rows = [], shown = 0, total = 0;
    first = firstHit = -1;
    for (var i = 0; i < data.length; i++) {
      var c = data[i], hit = -1;
      for (var j = 0; j < c.m.length; j++) {
        if (String(c.m[j]).toLowerCase().indexOf(q) >= 0) { hit = j; break; }
      }
      if (hit < 0) continue;
      total++;
      if (shown >= 50) continue;
      shown++;
      var who;
      if (c.x) {  // an index entry and the documents dropped as seen in it
        who = hit === 0 ? 'index entry' : 'dropped as seen in the index, ' + c.d[hit] +
          ' bits from the entry' + (c.j && c.j[hit] != null ? ', estimated Jaccard ' +
          Number(c.j[hit]).toFixed(3) : '');
      } else {
        who = String(c.m[hit]) === String(c.k) ? 'kept' : 'dropped, ' + c.d[hit] +
          ' bits from kept' + (c.j && c.j[hit] != null ? ', Jaccard ' +
          Number(c.j[hit]).toFixed(3) : '');
      }
      var link = c.s >= 0 ? ' <a href="#cluster-' + c.s + '">see the texts</a>' :
        (c.x ? ' <a href="#index-matches">in the index</a>' :
         (texts[c.k] != null ? ' <a href="#" data-c="' + i + '" data-h="' + hit +
          '">show the texts</a>' : ' texts not in this page'));
      if (first < 0) { first = i; firstHit = hit; }
      rows.push('<tr><td><code>' + esc(c.m[hit]) + '</code></td><td>' + esc(who) +
        '</td><td><code>' + esc(c.k) + '</code>' + (c.x ? ' (index)' : '') +
        '</td><td class="num">' + c.m.length + '</td><td>' + link + '</td></tr>');
    }
    var none = '<p class="note">No cluster has a document whose id contains <code>' + esc(q) +
      '</code>: a document of the input with this id was kept, having no near-duplicate in ' +
      'this run (ids are matched as text, so check the spelling).</p>';
    out.innerHTML = total === 0 ? none :
      '<p class="note">' + total + ' cluster' + (total === 1 ? '' : 's') + ' match' +
      (total > shown ? ' (first ' + shown + ' shown)' : '') + '.</p>' +
      '<table class="grid" id="result-table"><tr><th>id</th><th>decision</th><th>kept id or ' +
      'index entry</th>' +
      '<th>size</th><th></th></tr>' + rows.join('') + '</table>';
  }
  box.addEventListener('input', show);
  var m = /[#&]q=([^&]*)/.exec(window.location.hash);
  if (m) { box.value = decodeURIComponent(m[1]); show(); }
  // "#q=ID&texts": the texts of the first cluster found, at once
  if (m && /[#&]texts(&|$)/.test(window.location.hash) && first >= 0 && texts[data[first].k] != null) {
    showTexts(data[first], firstHit, view);
  }
})();
"""


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _lines(text: str) -> list[str]:
    """Text split for a readable line diff: at line breaks and after sentence ends; control
    characters written as ``\\x01`` (difflib marks its changes with some of them)."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    out: list[str] = []
    for line in text.splitlines() or [""]:
        out += _SENTENCE_END.split(line) if len(line) > 100 else [line]
    return out


def _diff(
    kept_id: Any, kept: str | None, other_id: Any, other: str | None, other_is: str = "dropped"
) -> str:
    if kept is None or other is None:
        missing = kept_id if kept is None else other_id
        return f'<p class="note">The text of <code>{_e(missing)}</code> was not found in the input.</p>'
    table = difflib.HtmlDiff(tabsize=4).make_table(
        _lines(kept), _lines(other), f"kept: {_e(kept_id)}", f"{other_is}: {_e(other_id)}"
    )
    # two columns a side (line number, text) that wrap like prose: HtmlDiff's navigation
    # columns, fixed spaces and nowrap go
    table = _NEXT_CELL.sub("", table).replace("&nbsp;", " ").replace(' nowrap="nowrap"', "")
    return _COLGROUPS.sub(_COLS, table, count=1)


def _subtitle(s: Mapping[str, Any], settings: Mapping[str, Any], has_jaccard: bool) -> str:
    """What the run did, in one sentence: verified at a threshold, or fingerprints only."""
    d = settings.get("distance")
    within = f" within {_e(d)} bits" if d is not None else ""
    t = s.get("threshold", settings.get("threshold"))
    verified = s.get("verified")
    if verified is None:  # (a clusters file alone: its Jaccards tell)
        verified = has_jaccard
    if verified:
        at = f" at least {float(t):g}" if t is not None else " at least the threshold"
        how = s.get("candidates", settings.get("candidates"))
        scheme = s.get("bands", settings.get("bands"))
        if how == "prefix":
            whose = "that share one of their rarest shingles (every pair at the threshold)"
        elif how == "bands" and scheme:
            b, r = scheme
            p = candidate_probability(float(t), int(b), int(r)) if t is not None else None
            odds = f" (a pair at the threshold with probability {p:.4f})" if p else ""
            whose = f"that share one of {_e(b)} MinHash bands of {_e(r)} rows{odds}"
        else:
            whose = f"whose fingerprints differ{within}"
        return (
            f"Verified dedup: a document was dropped when the exact Jaccard similarity of its "
            f"shingle set with a kept document's was{at}; candidates were the documents "
            f"{whose}. Each cluster keeps one document."
        )
    return (
        f"Fingerprints only (--no-verify): documents whose 64-bit simhash fingerprints "
        f"differ{within} were clustered, nothing checked against the texts; each cluster keeps "
        "one document and drops the others."
    )


def _table(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="grid">{body}</table>'


def _summary_rows(s: Mapping[str, Any], settings: Mapping[str, Any]) -> list[tuple[str, str]]:
    docs = int(s.get("documents", 0))
    dropped = int(s.get("dropped", 0))
    pct = f" ({100.0 * dropped / docs:.1f}%)" if docs else ""
    rows = [("documents", f"{docs:,}")]
    if s.get("skipped"):
        rows.append(("bad records skipped", f"{int(s['skipped']):,}"))
    rows += [
        ("clusters of 2 or more", f"{int(s.get('clusters', 0)):,}"),
        ("dropped", f"{dropped:,}{pct}"),
        ("kept", f"{int(s.get('kept', docs - dropped)):,}"),
    ]
    if s.get("bytes_in"):
        out = f", {size(s['bytes_out'])} out" if s.get("bytes_out") else ""
        rows.append(("bytes", f"{size(s['bytes_in'])} in{out}"))
    sec = s.get("seconds")
    if isinstance(sec, Mapping) and "total" in sec:
        rows.append(("time", f"{float(sec['total']):.2f} s"))
    against = s.get("against")
    if isinstance(against, Mapping):
        where = f" in {_e(against['index'])}" if against.get("index") else ""
        rows.append(
            ("dropped as seen in the index", f"{int(against.get('dropped', 0)):,}{where}: "
             + _e(_how(against, s)))
        )  # fmt: skip
    rows += _common_rows(s)
    if (note := family_note(s)) is not None:
        rows.append(("largest family", _e(note)))
    rows += [(str(k), _e(v)) for k, v in settings.items()]
    return rows


def _common_rows(s: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What ``--common-shingles`` left out, or the hint that the largest clusters look like
    pages sharing a template (the summary's ``common_shingles`` / ``template_hint``)."""
    common, hint = s.get("common_shingles"), s.get("template_hint")
    if isinstance(common, Mapping):
        return [("common shingles left out",
                 f"{int(common['keys']):,} (in more than {int(common['limit']):,} documents); "
                 f"{int(common['all_common']):,} documents with only common shingles kept")]  # fmt: skip
    if isinstance(hint, Mapping):
        return [("hint", _e(
            f"{int(hint['clusters'])} of the largest clusters (the largest "
            f"{int(hint['largest']):,} documents) look like pages sharing a template: "
            f"{100 * float(hint['share']):.0f}% of the other documents hold their shared "
            f"shingles; try --common-shingles {float(hint['suggest']):g}"))]  # fmt: skip
    return []


def _how(against: Mapping[str, Any], s: Mapping[str, Any]) -> str:
    """How documents were matched against the index, in words."""
    d = against.get("distance")
    if against.get("verified") == "sketch":
        at = f" >= {s['threshold']:g}" if s.get("threshold") is not None else ""
        within = f", candidates within {d} bits" if d is not None else ""
        return f"Jaccard{at} estimated from the index's sketches{within}"
    within = f" within {d} bits" if d is not None else ""
    return f"fingerprints{within}; not Jaccard-verified (the index keeps no sketches)"


def _index_section(digest: ClusterDigest, s: Mapping[str, Any]) -> str:
    """The documents dropped as seen in an index: each with the entry it matched (``--against``;
    the index holds no texts, so none are shown)."""
    if not digest.index_count:
        return ""
    sketch, total = digest.index_sketch, digest.index_dropped
    body = []
    for r in digest.index_listed:
        js = r.get("jaccards")
        for k in range(1, len(r["members"])):
            if len(body) == REPORT_INDEX_ROWS:
                break
            est = ""
            if sketch:
                est = (
                    f'<td class="num">{float(js[k]):.3f}</td>'
                    if js and js[k] is not None
                    else "<td></td>"
                )
            body.append(
                f"<tr><td><code>{_e(r['members'][k])}</code></td><td><code>{_e(r['kept'])}</code>"
                f'</td><td class="num">{r["distances"][k]}</td>{est}</tr>'
            )
    head = "<tr><th>dropped id</th><th>index entry</th><th>bits</th>"
    head += "<th>estimated Jaccard</th></tr>" if sketch else "</tr>"
    against = s.get("against") if isinstance(s.get("against"), Mapping) else {}
    how = _how(against or {"verified": "sketch" if sketch else "fingerprint"}, s)
    more = (
        f' <span class="note">First {len(body):,} of {total:,} shown; the search finds them all.</span>'
        if len(body) < total
        else ""
    )
    return (
        f'<h2>Dropped as seen in the index</h2>\n<p class="note">{total:,} document'
        f"{'s'[: total != 1]} matched an entry of the index of earlier documents ({_e(how)}) and "
        f"{'were' if total != 1 else 'was'} dropped; the index keeps no texts, so each is listed "
        f"with the entry it matched.{more}</p>\n"
        f'<table class="grid" id="index-matches">{head}{"".join(body)}</table>'
    )


def _jaccards(c: dict[str, Any]) -> str:
    """A cluster's :func:`~neardup.pipeline.report.jaccard_range` as text (empty without)."""
    got = jaccard_range(c)
    if got is None:
        return ""
    return f"{got[0]:.3f}" if f"{got[0]:.3f}" == f"{got[1]:.3f}" else f"{got[0]:.3f}–{got[1]:.3f}"


def _largest(digest: ClusterDigest, texts: Mapping[Any, str]) -> str:
    """The largest clusters: size, bits, the Jaccard range of their drops, dropped ids, and
    their texts on demand (the largest one's shown at once)."""
    where, jac = digest.where, digest.has_jaccard
    rows = []
    for rank, (i, c) in enumerate(digest.largest[:REPORT_LARGEST]):
        members = [m for m in c["members"] if json_id(m) != json_id(c["kept"])]
        shown = ", ".join(f"<code>{_e(m)}</code>" for m in members[:8])
        more = f" and {len(members) - 8:,} more" if len(members) > 8 else ""
        link = ""
        if _has_text(json_id(c["kept"]), digest, texts):
            link = f' <a href="#largest-texts" data-l="{rank}">show the texts</a>'
        if i in where:
            link += f' <a href="#cluster-{where[i]}">side by side</a>'
        rows.append(
            f'<tr><td><code>{_e(c["kept"])}</code>{link}</td><td class="num">'
            f'{len(c["members"]):,}</td><td class="num">{max(c["distances"])}</td>'
            + (f'<td class="num">{_jaccards(c)}</td>' if jac else "")
            + f"<td>{shown}{more}</td></tr>"
        )
    head = (
        "<tr><th>kept id</th><th>size</th><th>max bits</th>"
        + ("<th>Jaccard of drops (min–max)</th>" if jac else "")
        + "<th>dropped ids</th></tr>"
    )
    return (
        f'<table class="grid" id="largest-table">{head}{"".join(rows)}</table>\n'
        '<div id="largest-texts"></div>'
    )


def _has_text(i: Any, digest: ClusterDigest, texts: Mapping[Any, str]) -> bool:
    """Whether the page embeds the text of id ``i``."""
    return i in digest.embedded and texts.get(i) is not None


def _largest_json(digest: ClusterDigest) -> str:
    """The largest clusters for the page's script: each cluster's kept id, size and the
    members whose texts it shows (:func:`~neardup.pipeline.report.cluster_head`) with their
    distances and Jaccards."""
    rows = []
    for _, c in digest.largest[:REPORT_LARGEST]:
        head = set(cluster_head(c))
        at = [k for k, m in enumerate(c["members"]) if json_id(m) in head]
        js = c.get("jaccards")
        row = {"k": json_id(c["kept"]), "n": len(c["members"]),
               "m": [json_id(c["members"][k]) for k in at],
               "d": [c["distances"][k] for k in at]}  # fmt: skip
        if js is not None:
            row["j"] = [js[k] for k in at]
        rows.append(row)
    return json.dumps(rows, ensure_ascii=False).replace("<", "\\u003c")


def _texts_note(digest: ClusterDigest, texts: Mapping[Any, str]) -> str:
    """What the page leaves out of the texts its search and largest clusters show."""
    listed = len(digest.listed)
    with_texts = sum(_has_text(json_id(c["kept"]), digest, texts) for c in digest.listed)
    if with_texts >= listed:
        return ""
    return (
        f'<p class="note">Texts are in this page for {with_texts:,} of the {listed:,} '
        f"clusters the search covers, the largest and the nearest the threshold first (at most "
        f"{REPORT_EMBED_TEXTS:,} texts, the first {REPORT_EMBED_CHARS:,} characters of each); "
        "the search shows the others' ids and numbers only.</p>"
    )


def _cluster_block(k: int, c: dict[str, Any], texts: Mapping[Any, str]) -> str:
    kept = json_id(c["kept"])
    js = c.get("jaccards")
    parts = []
    dropped = [(m, i) for i, m in enumerate(c["members"]) if json_id(m) != kept]
    for m, i in dropped[: config.REPORT_MEMBERS]:
        sim = f", Jaccard {float(js[i]):.3f}" if js is not None and js[i] is not None else ""
        parts.append(
            f"<h4>dropped <code>{_e(m)}</code>: {c['distances'][i]} bits from the kept "
            f"fingerprint{sim}</h4>"
            + _diff(kept, texts.get(kept), json_id(m), texts.get(json_id(m)))
        )
    more = len(dropped) - config.REPORT_MEMBERS
    if more > 0:
        parts.append(f'<p class="note">and {more:,} more dropped documents.</p>')
    ids = " ".join(str(json_id(m)) for m in c["members"])
    return (
        f'<details class="cluster" id="cluster-{k}" data-ids="{_e(ids)}"{" open" if k < 3 else ""}>'
        f"<summary>kept <code>{_e(c['kept'])}</code>, {len(c['members']):,} documents</summary>"
        + "".join(parts)
        + "</details>"
    )


def _borderline_section(digest: ClusterDigest, texts: Mapping[Any, str]) -> str:
    """The drops nearest the threshold, each against its kept document: if these are true
    near-duplicates, the threshold could go lower; if not, it should go higher."""
    pairs = digest.borderline
    if not pairs:
        return ""
    verified = pairs[0][2].get("jaccards") is not None
    blocks = []
    for _, k, c in pairs:
        kept, m = json_id(c["kept"]), json_id(c["members"][k])
        js = c.get("jaccards")
        sim = f"Jaccard {float(js[k]):.3f}, " if verified else ""
        blocks.append(
            f'<details class="pair"{" open" if not blocks else ""}><summary>dropped '
            f"<code>{_e(m)}</code> for <code>{_e(kept)}</code>: {sim}{c['distances'][k]} bits"
            "</summary>" + _diff(kept, texts.get(kept), m, texts.get(m)) + "</details>"
        )
    nearest = "lowest Jaccard similarity" if verified else "fingerprints most bits apart"
    return (
        '<h2 id="borderline">Nearest the threshold</h2>\n<p class="note">The '
        f"{len(pairs):,} dropped documents with the {nearest}, each against the document kept "
        "for it. If these are true near-duplicates, a lower threshold would drop more of their "
        "kind; if they are not, raise it.</p>\n" + "".join(blocks)
    )


def _near_counts(near: Mapping[str, Any]) -> str:
    """How many kept documents each lower threshold would reach, as a sentence."""
    said = [f"{int(c):,} at {t:g}" for t, c in near["reach"]]
    if not said:
        return ""
    return (
        "Kept documents whose nearest candidate reaches a lower threshold: "
        + ", ".join(said)
        + " (a rerun there would drop about as many; fewer where two of them are each other's"
        " nearest)."
    )


def _near_section(near: Mapping[str, Any] | None, verified: bool, texts: Mapping[Any, str]) -> str:
    """The kept documents nearest the threshold from below, each against its nearest kept
    candidate: if these are near-duplicates, the threshold should go lower."""
    head = '<section id="near-misses"><h2>Kept, just under the threshold</h2>\n'
    if near is None:
        if not verified:
            return ""
        return head + (
            '<p class="note">This run did not look for the kept documents nearest the '
            "threshold: <code>neardup dedup --report</code> finds them (a clusters file does "
            "not list them).</p>"
            "</section>"
        )
    t, pairs = near["threshold"], near["pairs"]
    blocks = []
    for p in pairs:
        kept, nearest = p["kept"], p["nearest"]
        blocks.append(
            f'<details class="pair near"{" open" if not blocks else ""}><summary>kept '
            f"<code>{_e(kept)}</code>, nearest <code>{_e(nearest)}</code>: Jaccard "
            f"{p['jaccard']:.3f}</summary>"
            + _diff(nearest, texts.get(nearest), kept, texts.get(kept), "kept too")
            + "</details>"
        )
    low = max(t - REPORT_NEAR_WINDOW, 0.0)
    below = int(sum(near["counts"][: int(hundredths([low])[0])]))
    none = (
        f"No kept document has a kept candidate (under the threshold {t:g}): none came near "
        "being dropped."
        if not pairs
        else f"The {len(pairs):,} kept documents with the highest Jaccard similarity to a kept "
        f"candidate before them (in keep order), all under the threshold {t:g}, each against "
        "that candidate. If these are near-duplicates you want gone, lower the threshold; the "
        "chart above counts them per 0.01 beside the drops."
    )
    more = f" {below:,} more kept documents have their nearest candidate under {low:.2f} " \
        "(left of the chart)." if below else ""  # fmt: skip
    return (
        head
        + f'<p class="note">{none} {_near_counts(near) if pairs else ""}{more}</p>\n'
        + "".join(blocks)
        + "</section>"
    )


def _counts_json(digest: ClusterDigest, near: Mapping[str, Any] | None) -> str:
    """The chart's numbers, for other tools: documents per 0.01 of Jaccard (index ``k`` counts
    ``[k / 100, (k + 1) / 100)``, 1.0 in the last), dropped (with their kept document) and
    kept (with their nearest kept candidate; null without ``near``)."""
    kept = None if near is None else [int(c) for c in near["counts"]]
    out = {"threshold": None if near is None else near["threshold"],
           "dropped": digest.drop_hundredths.tolist(), "kept": kept}  # fmt: skip
    return json.dumps(out)


def _texts_json(digest: ClusterDigest, texts: Mapping[Any, str]) -> str:
    """The embedded texts (:func:`neardup.pipeline.report.embedded_ids`) as JSON safe inside a
    script element: each cut at :data:`REPORT_EMBED_CHARS`, control characters
    written as ``\\x01``."""
    out = {}
    for i in digest.embedded:
        if texts.get(i) is not None:
            out[str(i)] = _CONTROL.sub(
                lambda m: f"\\x{ord(m.group()):02x}", texts[i][:REPORT_EMBED_CHARS]
            )
    return json.dumps(out, ensure_ascii=False).replace("<", "\\u003c")


def _search_index(digest: ClusterDigest) -> list[dict[str, Any]]:
    """The rows the page's search looks through: the first clusters, then the index's rows, at
    most :data:`neardup.config.REPORT_MAX_CLUSTERS` in all."""
    where, n = digest.where, digest.count
    index = []
    listed = [*digest.listed, *digest.index_listed][: config.REPORT_MAX_CLUSTERS]
    for i, c in enumerate(listed):
        row = {"k": json_id(c["kept"]), "m": [json_id(m) for m in c["members"]],
               "d": c["distances"], "s": where.get(i, -1) if i < n else -1}  # fmt: skip
        if c.get("jaccards") is not None:
            row["j"] = c["jaccards"]
        if i >= n:
            row["x"] = 1  # an index entry: "kept" is the entry, the others were dropped for it
        index.append(row)
    return index


def render(
    summary: Mapping[str, Any],
    digest: ClusterDigest,
    texts: Mapping[Any, str],
    *,
    settings: Mapping[str, Any],
    title: str,
    near: Mapping[str, Any] | None = None,
) -> str:
    """The report as one HTML string (see :func:`neardup.pipeline.report.write_report`)."""
    n = digest.count
    index = _search_index(digest)
    # "<" only occurs inside JSON strings: as \u003c no id can open a comment or close the script
    index_json = json.dumps(index, ensure_ascii=False).replace("<", "\\u003c")
    cut = n + digest.index_count - len(index)
    plots = "".join(f'<div class="plot">{svg}</div>' for svg in draw_plots(digest, near))
    has_jaccard = digest.has_jaccard
    blocks = "".join(
        _cluster_block(k, digest.sampled[i], texts) for k, i in enumerate(digest.sample)
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{_CSS}</style></head>
<body>
<h1>{_e(title)}</h1>
<p class="note">{_subtitle(summary, settings, has_jaccard)}</p>
<h2>Summary</h2>
{_table(_summary_rows(summary, settings))}
<h2>Why documents were dropped</h2>
<label for="search">Find a document by id:</label>
<input id="search" type="search" placeholder="id, or part of it" autocomplete="off">
<div id="results"></div>
<div id="texts" data-members="{REPORT_EMBED_MEMBERS}"></div>
{f'<p class="note">The search covers the first {len(index):,} clusters ({cut:,} more not listed).</p>' if cut > 0 else ""}
{_texts_note(digest, texts)}
<h2>Distributions</h2>
<div class="plots">{plots or '<p class="note">No clusters: nothing was dropped.</p>'}</div>
{"" if has_jaccard else '<p class="note">Distances are in bits between fingerprints; Jaccard similarities appear when the clusters carry them.</p>'}
{_borderline_section(digest, texts)}{_near_section(near, bool(summary.get("verified", has_jaccard)), texts)}
{_index_section(digest, summary)}
<h2>Largest clusters</h2>
{_largest(digest, texts) if n else '<p class="note">None.</p>'}
<h2>Kept and dropped texts, side by side</h2>
<p class="note">{len(digest.sample):,} of {n:,} clusters, chosen at random; changed words
are <span class="diff_chg">marked</span>, <span class="diff_add">added</span> and
<span class="diff_sub">removed</span> lines coloured.</p>
{blocks}
<script type="application/json" id="similarity-counts">{_counts_json(digest, near)}</script><script type="application/json" id="cluster-index">{index_json}</script>
<script type="application/json" id="cluster-texts">{_texts_json(digest, texts)}</script>
<script type="application/json" id="largest-index">{_largest_json(digest)}</script>
<script>{_JS}</script>
</body></html>
"""
