"""What a page shows, read back from its HTML: the text a browser displays, and with `attributes`
the attribute values too (titles, alt texts, links). The report's last gate and the renderer check
read pages this one way."""

from __future__ import annotations

from html.parser import HTMLParser


class _Shown(HTMLParser):
    def __init__(self, attributes: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.attributes = attributes
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.attributes:
            self.parts.extend(v for _, v in attrs if v)


def page_text(markup: str, *, attributes: bool = False, sep: str = "") -> str:
    """The text of `markup`, its pieces joined by `sep` (entities decoded)."""
    parser = _Shown(attributes)
    parser.feed(markup)
    parser.close()
    return sep.join(parser.parts)


__all__ = ["page_text"]
