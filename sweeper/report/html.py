"""index.html: one self-contained page (inline style, images by relative path) that embeds
the tables and figures and opens from disk without a server."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape

from sweeper.report.tables import Table

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1400px;
       padding: 0 1rem; color: #222; line-height: 1.4; }
h1 { margin-bottom: 0.2rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
.meta { color: #555; } .note { background: #fff8e1; padding: 0.4rem 0.8rem; margin: 0.3rem 0; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.55rem; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
td.pub, th.pub { background: #eef4fb; color: #2a4a6b; }
.caption { max-width: 1100px; } .footnotes { font-size: 0.85rem; color: #444; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #444; font-size: 0.9rem; } .files a { margin-right: 0.8rem; }
.scroll { overflow-x: auto; max-width: 100%; }
"""


def table_html(table: Table, files: Sequence[str] = ()) -> str:
    published = {j for j, h in enumerate(table.header) if h.endswith("]") and " [" in h}
    parts = [f'<h2 id="{escape(table.name)}">{escape(table.title)}</h2>']
    parts.append(f'<p class="caption">{escape(table.caption)}</p>')
    if table.rows:
        head = "".join(
            f"<th{' class=pub' if j in published else ''}>{escape(h)}</th>"
            for j, h in enumerate(table.header)
        )
        body = []
        for i, row in enumerate(table.rows):
            cells = []
            for j, text in enumerate(row):
                inner = escape(text)
                if (i, j) in table.bold and text:
                    inner = f"<b>{inner}</b>"
                cells.append(f"<td{' class=pub' if j in published else ''}>{inner}</td>")
            body.append(f"<tr>{''.join(cells)}</tr>")
        # a table wider than the window (many settings, each beside its published value)
        # scrolls in its own box: the page itself never scrolls sideways
        parts.append(
            f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>"
        )
    else:
        parts.append("<p><em>(none)</em></p>")
    if table.footnotes:
        items = "".join(f"<li>{escape(n)}</li>" for n in table.footnotes)
        parts.append(f'<ul class="footnotes">{items}</ul>')
    if files:
        links = "".join(f'<a href="{escape(f)}">{escape(f.rsplit("/", 1)[-1])}</a>' for f in files)
        parts.append(f'<p class="files">{links}</p>')
    return "\n".join(parts)


def _linked(text: str) -> str:
    """``text`` escaped, its http(s) addresses made links (e.g. the MLflow UI's runs)."""
    return re.sub(r"(https?://[^\s,]+)", r'<a href="\1">\1</a>', escape(text))


def page(
    title: str,
    meta: Sequence[str],
    notes: Sequence[str],
    tables: Sequence[tuple[Table, Sequence[str]]],
    figures: Sequence[tuple[str, str]],
) -> str:
    """The report page: header, notes, tables (with links to their files), figures."""
    toc = [f'<a href="#{escape(t.name)}">{escape(t.title)}</a>' for t, _ in tables]
    if figures:
        toc.append('<a href="#figures">Figures</a>')
    body = [f"<h1>{escape(title)}</h1>"]
    body += [f'<p class="meta">{_linked(line)}</p>' for line in meta]
    body.append(f"<p>{' · '.join(toc)}</p>")
    body += [f'<p class="note">{escape(note)}</p>' for note in notes]
    body += [table_html(table, files) for table, files in tables]
    if figures:
        body.append('<h2 id="figures">Figures</h2>')
        for path, caption in figures:
            body.append(
                f'<figure><img src="{escape(path)}" alt="{escape(caption)}">'
                f'<figcaption>{escape(caption)} (<a href="{escape(path)}">{escape(path)}</a>)'
                "</figcaption></figure>"
            )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
