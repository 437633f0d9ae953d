"""MkDocs hook: the Sphinx roles of neardup's docstrings (:func:`x`, :class:`~a.B`, ...) become
cross-references to the API reference where the name is documented there, plain code otherwise."""

from __future__ import annotations

import html
import re

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|exc|obj):<code>(~?)([\w.]+)</code>")


def _ref(m: re.Match) -> str:
    short, target = m.group(1), m.group(2)
    text = target.rsplit(".", 1)[-1] if short else target
    ident = html.escape(target, quote=True)
    return f'<autoref identifier="{ident}" optional><code>{html.escape(text)}</code></autoref>'


def on_page_content(html_text: str, **kwargs) -> str:
    return ROLE.sub(_ref, html_text)
