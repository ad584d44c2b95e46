"""The similarity report's page (grader.regrade.similarity compares; this writes what it found as one HTML file).

Every student byte reaches it escaped (the code panes arrive escaped and marked); the page forbids scripts by its
Content-Security-Policy and loads nothing from outside.
"""
from __future__ import annotations

import html
from typing import TYPE_CHECKING, NamedTuple

from grader.core.pieces import MODULES
from grader.regrade.similarity_findings import NEAR

if TYPE_CHECKING:
    from grader.regrade.similarity_findings import Findings

MAX_ROWS = 2000  # pairs the table lists (all are returned)


class Method(NamedTuple):
    """How the pairs were scored, for the page to say: copydetect's version and grader.regrade.similarity's numbers."""

    version: str
    noise: int
    min_shared: int
    common_share: float
    common_min: int


_STYLE = """body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}.hi{background:#fdd}
.cols{display:flex;gap:1em}.cols pre{flex:1;overflow:auto;background:#f8f8f8;padding:.5em;font-size:small}
.highlight-red{background:#f2b6b6}.highlight-green{background:#b6f2b6}"""


def cell(pair: dict, module: str) -> str:
    said = "identical" if module in pair.get("identical", ()) else f"{pair['pieces'][module]:.2f}"
    if module in pair.get("explained", {}):
        return f"{said}, {html.escape(pair['explained'][module])}'s"
    return f"{said}, a group's" if module in pair.get("grouped", ()) else said


def _flagged(pair: dict, module: str, threshold: float) -> bool:
    """Whether the piece is one the pair is listed for: at the threshold, and no known source's or group's."""
    return (pair["pieces"][module] >= threshold and module not in pair.get("explained", {})
            and module not in pair.get("grouped", ()))


def page(findings: Findings, shown: list[dict], files: dict[str, int], students: int, notes: list[str],
         threshold: float, method: Method, common: list[str], sources: list[str]) -> str:
    """The report: the method in words, the flagged pairs' table (what no known source explains), the groups of
    students, the known sources' matches, the shown pairs' code side by side (already escaped and marked by
    grader.regrade.similarity), the common code left out and the files skipped."""
    e = html.escape
    pairs = findings.pairs
    n_known = len({s["source"] for s in findings.sources})
    out = ['<!DOCTYPE html><html><head><meta charset="utf-8">',
           # defence in depth: were a student's byte ever left unescaped, no script would run, nothing would load
           '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'">',
           f"<title>Similarity report</title><style>{_STYLE}</style></head><body>",
           "<h1>Similarity report</h1>",
           (f"<p>{students} students, each piece compared with the same piece only, the stubs' lines left out. "
           f"A piece's score is the larger share of either file found in the other, in runs of {method.noise} or more "
           "characters once names, strings, comments and layout are normalised "
           f"(copydetect {e(method.version)}), and 0 under {method.min_shared} such characters shared; "
           "a pair's score is its highest piece's. "
           f"A run shared by more than {method.common_share:.0%} of the students who wrote the piece, and by at least "
           f"{method.common_min}, is the assignment's and is ignored, as is short code that many hand in identically. "
           "Two pieces identical once comments and layout are left out are <b>identical</b> and score 1, however "
           f"short. {len(pairs)} pairs at or above {threshold:g} that no known source or group explains.</p>"),
           _known(sources, n_known),
           "<p>Files per piece: " + ", ".join(f"{m} {files[m]}" for m in MODULES) + "</p>",
           "<h2>Copies between students</h2>",
           "<p>Pairs of students whose piece matches no known source and no group below, highest first.</p>"]
    if pairs:
        out.append("<table><tr><th>#</th><th>a</th><th>b</th><th>score</th>"
                   + "".join(f"<th>{m}</th>" for m in MODULES) + "</tr>")
        for n, p in enumerate(pairs[:MAX_ROWS], 1):
            cells = "".join("<td></td>" if m not in p["pieces"] else
                            f'<td{" class=hi" if _flagged(p, m, threshold) else ""}>{cell(p, m)}</td>'
                            for m in MODULES)
            link = f'<a href="#pair{n}">{n}</a>' if n <= len(shown) else str(n)
            out.append(f"<tr><td>{link}</td><td>{e(p['a'])}</td><td>{e(p['b'])}</td>"
                       f"<td>{p['score']:.2f}</td>{cells}</tr>")
        out.append("</table>")
        if len(pairs) > MAX_ROWS:
            out.append(f"<p>{len(pairs) - MAX_ROWS} more pairs are left out here; a higher threshold lists them.</p>")
    else:
        out.append("<p>None.</p>")
    out += _groups(findings.groups) + _sources(findings.sources)
    if len(pairs) > len(shown):
        out.append(f"<p>The code of the first {len(shown)} pairs follows.</p>")
    for n, (p, code) in enumerate(zip(pairs, shown), 1):
        out.append(f'<h3 id="pair{n}">{n}. {e(p["a"])} and {e(p["b"])}: {p["score"]:.2f}</h3>')
        for module in (m for m in MODULES if m in code):
            ca, cb = code[module]
            out.append(f'<details{" open" if p["pieces"][module] == p["score"] else ""}><summary>{module}.py: '
                       f'{cell(p, module)} (red: {e(p["a"])}, green: {e(p["b"])}; what each wrote, '
                       f'the stub left out)</summary><div class="cols"><pre>{ca}</pre><pre>{cb}</pre></div></details>')
    if common:
        out.append("<h2>Common code, not counted</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in common) + "</ul>")
    if notes:
        out.append("<h2>Files left out</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
    out.append("</body></html>\n")
    return "\n".join(out)


def _known(sources: list[str], matched: int) -> str:
    if not sources:
        return ("<p>No known source was given: code two students both took from the reference or an earlier term "
                "shows here as a copy between them.</p>")
    shown = ", ".join(html.escape(s) for s in sources[:10]) + (f" and {len(sources) - 10} more" if len(sources) > 10
                                                               else "")
    return (f"<p>Known sources, each piece compared with each student's: {shown}. {matched} of them matched. A "
            "student matches a source where their piece is identical to it or their own share found in it reaches "
            "the threshold; two students matching the same source are listed under it, not as a pair, unless they "
            "share code beyond it (their score with the source's lines left out still reaches the threshold).</p>")


def _groups(groups: list[dict]) -> list[str]:
    out = ["<h2>Groups of students</h2>",
           "<p>Three or more students matching no known source, each handing in a piece identical to another's, "
           f"or alike both ways (each at least {NEAR:.2f} found in the other): one group, not every pair of them.</p>"]
    if not groups:
        return out + ["<p>None.</p>"]
    out.append("<table><tr><th>piece</th><th>students</th><th>how alike</th><th>who</th></tr>")
    for g in groups[:MAX_ROWS]:
        alike = "identical" if g["identical"] else f"{g['score']:.2f} or more"
        out.append(f"<tr><td>{g['piece']}.py</td><td>{len(g['students'])}</td><td>{alike}</td>"
                   f"<td>{html.escape(', '.join(g['students']))}</td></tr>")
    return out + ["</table>"]


def _sources(sources: list[dict]) -> list[str]:
    out = ["<h2>Matching a known source</h2>",
           "<p>Students whose piece matches a known source, grouped by piece and source, most students first.</p>"]
    if not sources:
        return out + ["<p>None.</p>"]
    out.append("<table><tr><th>piece</th><th>source</th><th>students</th><th>who (score)</th></tr>")
    for s in sources[:MAX_ROWS]:
        who = ", ".join(f"{name} ({'identical' if name in s['identical'] else f'{score:.2f}'})"
                        for name, score in sorted(s["students"].items()))
        out.append(f"<tr><td>{s['piece']}.py</td><td>{html.escape(s['source'])}</td><td>{len(s['students'])}</td>"
                   f"<td>{html.escape(who)}</td></tr>")
    return out + ["</table>"]
