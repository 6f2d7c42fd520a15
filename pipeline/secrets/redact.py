"""Secrets never reach the corpus, a model, or a report: masking as every caller needs it.

What counts as a secret, and where it is, is `pipeline.secrets.scan` (detect-secrets plugins plus
our own patterns); `pipeline.secrets.gate` holds a batch's known secrets and the last check before
anything leaves. This module is the thin layer callers use:

* `redact(text)` masks the secrets detected in a free text (a claim, a gist, a task statement, an
  evidence quote), optionally with a batch's known secrets too, and says which kinds it masked;
* `LineMasker` masks transcript lines as the consolidator's tools return them: secrets are found on
  the whole stored line (raw or decoded) and masked in whatever slice the tool shows, so a hit's
  line and column still refer to the stored text while the text shown never holds a secret.

A mask reads `[REDACTED:kind]`. A redacted quote no longer matches its transcript verbatim, except
through the mask rule of `pipeline.consolidator.quotes`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pipeline.secrets.gate import SecretSet
from pipeline.secrets.scan import MASK, MASK_RE, Secret, Span, detect, line_secrets, render, spans

__all__ = ["MASK_RE", "LineMasker", "Redaction", "find_secrets", "has_mask", "redact", "redacted"]


@dataclass(frozen=True)
class Redaction:
    text: str
    kinds: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.kinds)


def redact(text: str, known: SecretSet | None = None) -> Redaction:
    """`text` with every secret detected in it (and every secret of `known`) masked."""
    if not text:
        return Redaction(text, ())
    secrets = detect(text) | (known.secrets if known is not None else frozenset())
    found = spans(text, secrets)
    if not found:
        return Redaction(text, ())
    return Redaction(render(text, found, 0, len(text)), tuple(dict.fromkeys(sp.kind for sp in found)))


def redacted(text: str, known: SecretSet | None = None) -> str:
    return redact(text, known).text


def find_secrets(text: str) -> list[str]:
    """The kinds of secret still present in `text` (the render gate's last check)."""
    return sorted({s.kind for s in detect(text)})


def has_mask(text: str) -> bool:
    return MASK_RE.search(text) is not None


class LineMasker:
    """Masks stored transcript lines for a reader who must not see secrets (a model, `--redact`).

    The secrets of a line are those detected on it plus the batch's `known` ones (a password
    detected where it is assigned is masked on every other line that repeats it).
    """

    def __init__(self, known: SecretSet | None = None) -> None:
        self.known: frozenset[Secret] = known.secrets if known is not None else frozenset()

    def secrets(self, line: str) -> frozenset[Secret]:
        return line_secrets(line) | self.known

    def spans(self, line: str) -> list[Span]:
        return spans(line, self.secrets(line))

    def line(self, line: str) -> str:
        found = self.spans(line)
        return render(line, found, 0, len(line)) if found else line

    def head(self, line: str, width: int) -> str:
        """The first `width` characters of `line`, its secrets (found on the whole line) masked: one
        cut by the edge is masked too. Most lines hold none, and are only cut."""
        secrets = line_secrets(line)
        if self.known:
            secrets = secrets | self.known
        found = spans(line, secrets) if secrets else []
        return render(line, found, 0, width) if found else line[:width]

    def text(self, value: str | None) -> str | None:
        """A free text shown beside the lines (a cwd, a slug, a claim)."""
        if not value:
            return value
        found = spans(value, detect(value) | self.known)
        return render(value, found, 0, len(value)) if found else value

    def masked_with_map(self, line: str) -> tuple[str, list[Span], list[tuple[int, int]]]:
        """(masked line, spans, [(masked start, raw start) of each segment]): enough to turn a
        position in the masked line back into a position in the stored one."""
        found = self.spans(line)
        if not found:
            return line, found, [(0, 0)]
        out: list[str] = []
        segments: list[tuple[int, int]] = []
        at = 0
        size = 0
        for sp in found:
            segments.append((size, at))
            out.append(line[at : sp.start])
            size += sp.start - at
            mask = MASK.format(kind=sp.kind)
            segments.append((size, sp.start))
            out.append(mask)
            size += len(mask)
            at = sp.end
        segments.append((size, at))
        out.append(line[at:])
        return "".join(out), found, segments

    def find_masked(self, line: str, phrase: str) -> Iterator[tuple[int, str, int]]:
        """Occurrences of a phrase that holds masks, found in the masked line: (position in the
        stored line, masked line, position in the masked line). Non-overlapping, left to right."""
        parts = [p for p in MASK_RE.split(phrase)[::2] if p]
        if any(p not in line for p in parts):
            return
        masked, _, segments = self.masked_with_map(line)
        at = masked.find(phrase)
        while at >= 0:
            end = at + len(phrase)
            yield _raw_position(segments, at), masked, at
            at = masked.find(phrase, end)


def _raw_position(segments: list[tuple[int, int]], masked_at: int) -> int:
    """The stored-line position of a masked-line position (inside a mask: the secret's start)."""
    best = segments[0]
    index = 0
    for i, seg in enumerate(segments):
        if seg[0] <= masked_at:
            best, index = seg, i
        else:
            break
    if index % 2 == 1:  # odd segments are masks: a position inside one stands for the secret's start
        return best[1]
    return best[1] + (masked_at - best[0])

