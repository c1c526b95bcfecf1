"""The report as one self-contained HTML page: the Markdown report rendered (markdown-it-py,
with tables), every plot inlined as a data URI, one stylesheet, no script and nothing fetched,
so the file opens anywhere, mailed or archived, without the directory beside it."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from markdown_it import MarkdownIt

STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 70em; margin: 2em auto; padding: 0 1em;
       color: #1f2328; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; }
th { background: #f6f8fa; } tr:nth-child(even) td { background: #fbfcfd; }
img { max-width: 100%; } code { background: #f6f8fa; padding: 0 3px; }
h1, h2, h3 { border-bottom: 1px solid #d8dee4; padding-bottom: .2em; }
"""

_IMAGE = re.compile(r'<img src="([^":/]+\.png)"')


def markdown_page(markdown: str, directory: str | Path, title: str) -> str:
    """`markdown` (whose images are PNG files in `directory`) as a standalone HTML page."""
    body = MarkdownIt("commonmark").enable("table").render(markdown)

    def inline(match: re.Match) -> str:
        path = Path(directory) / match.group(1)
        if not path.is_file():
            return match.group(0)
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f'<img src="data:image/png;base64,{data}"'

    body = _IMAGE.sub(inline, body)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
            f"<body>\n{body}</body></html>\n")
