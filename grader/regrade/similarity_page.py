"""The similarity report's page (grader.regrade.similarity compares; this writes what it found as one HTML file).

Every student byte reaches it escaped (the code panes arrive escaped and marked); the page forbids scripts by its
Content-Security-Policy and loads nothing from outside.
"""
from __future__ import annotations

import html
from typing import NamedTuple

from grader.core.pieces import MODULES

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
    return "identical" if module in pair.get("identical", ()) else f"{pair['pieces'][module]:.2f}"


def page(pairs: list[dict], shown: list[dict], files: dict[str, int], students: int, notes: list[str],
         threshold: float, method: Method, common: list[str]) -> str:
    """The report: the method in words, the flagged pairs' table, the shown pairs' code side by side (already escaped
    and marked by grader.regrade.similarity), the common code left out and the files skipped."""
    e = html.escape
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
           f"short. {len(pairs)} pairs at or above {threshold:g}.</p>"),
           "<p>Files per piece: " + ", ".join(f"{m} {files[m]}" for m in MODULES) + "</p>",
           "<h2>Flagged pairs</h2>"]
    if pairs:
        out.append("<table><tr><th>#</th><th>a</th><th>b</th><th>score</th>"
                   + "".join(f"<th>{m}</th>" for m in MODULES) + "</tr>")
        for n, p in enumerate(pairs[:MAX_ROWS], 1):
            cells = "".join("<td></td>" if m not in p["pieces"] else
                            f'<td{" class=hi" if p["pieces"][m] >= threshold else ""}>{cell(p, m)}</td>'
                            for m in MODULES)
            link = f'<a href="#pair{n}">{n}</a>' if n <= len(shown) else str(n)
            out.append(f"<tr><td>{link}</td><td>{e(p['a'])}</td><td>{e(p['b'])}</td>"
                       f"<td>{p['score']:.2f}</td>{cells}</tr>")
        out.append("</table>")
        if len(pairs) > MAX_ROWS:
            out.append(f"<p>{len(pairs) - MAX_ROWS} more pairs are left out here; a higher threshold lists them.</p>")
    else:
        out.append("<p>None.</p>")
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
