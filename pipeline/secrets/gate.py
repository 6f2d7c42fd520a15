"""The secrets of a batch, and the last gate before anything leaves: does a text still hold one?

A `SecretSet` is built from the raw transcript lines a batch touches (`pipeline.secrets.scan`
detects them). It masks every known value wherever it appears, and it finds what masking by value
cannot: a secret that an engine rewrote. The error-shape normaliser turns digits into `<n>`, a
model may change case or drop separators; so both the text and each secret are reduced to
normalised forms (case folded, masks and placeholders removed, separators dropped; once with
digits kept, once with digits removed) and any run of `OVERLAP` characters that a text shares with
a secret's form is a leak. The gate refuses what leaks: a candidate, a statement, a line of the
report. Nothing here stores or prints a secret: a leak is reported by kind and position only.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pipeline.secrets.scan import MASK, MASK_RE, Secret, detect, line_secrets, render, spans
from pipeline.secrets.scan import mask as mask_text

__all__ = ["OVERLAP", "Leak", "SecretSet"]

# The shortest run shared with a secret that counts as a leak (letters, or letters and digits).
OVERLAP = 12
# Placeholders that normalisers put where a secret's digits or parts were: <n>, <id>, <value>, …
_PLACEHOLDER = re.compile(r"<[a-z]{1,8}>", re.I)


@dataclass(frozen=True)
class Leak:
    """A stretch of a checked text, [start, end), that shares OVERLAP or more characters with a
    secret of this kind (in one of its normalised forms)."""

    kind: str
    start: int
    end: int


def _normalised(text: str, keep_digits: bool) -> tuple[str, list[int]]:
    """Text reduced to lower-case letters (and digits), with each kept character's index in `text`.
    Masks and placeholders are dropped first, so `Q<n>vX` reads as `qvx`."""
    cut = [False] * len(text)
    for pattern in (MASK_RE, _PLACEHOLDER):
        for m in pattern.finditer(text):
            for i in range(m.start(), m.end()):
                cut[i] = True
    chars: list[str] = []
    where: list[int] = []
    for i, c in enumerate(text):
        if cut[i]:
            continue
        if c.isascii() and (c.isalpha() or (keep_digits and c.isdigit())):
            chars.append(c.lower())
            where.append(i)
    return "".join(chars), where


def _grams(form: str, first: int) -> Iterable[str]:
    """The OVERLAP-long pieces of a normalised secret, starting at or before index `first`."""
    return (form[i : i + OVERLAP] for i in range(0, min(first, len(form) - OVERLAP) + 1))


class SecretSet:
    """The secrets found in a batch's transcript lines (or any texts), by value and by normalised piece."""

    def __init__(self, secrets: Iterable[Secret] = ()) -> None:
        self.secrets: frozenset[Secret] = frozenset(secrets)
        self._grams: tuple[dict[str, str], dict[str, str]] = ({}, {})
        for s in sorted(self.secrets):
            value = s.value
            # An address identifies someone by its local part: only pieces that hold some of it
            # count (a claim naming the company's domain is not a leak).
            local = value.split("@", 1)[0] if s.kind == "email" else value
            for keep, index in ((True, self._grams[0]), (False, self._grams[1])):
                form, _ = _normalised(value, keep)
                head, _ = _normalised(local, keep)
                if len(form) < OVERLAP:
                    continue
                last = len(head) - 1 if s.kind == "email" else len(form)
                for gram in _grams(form, last):
                    index.setdefault(gram, s.kind)

    @classmethod
    def from_lines(cls, lines: Iterable[str]) -> SecretSet:
        """The secrets of raw transcript lines (each as stored in the warehouse)."""
        found: set[Secret] = set()
        for text in lines:
            found |= line_secrets(text)
        return cls(found)

    def __len__(self) -> int:
        return len(self.secrets)

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def __or__(self, other: SecretSet) -> SecretSet:
        return SecretSet(self.secrets | other.secrets)

    def counts(self) -> dict[str, int]:
        """Distinct secrets per kind."""
        return dict(sorted(Counter(s.kind for s in self.secrets).items()))

    def with_text(self, text: str) -> frozenset[Secret]:
        """The known secrets plus whatever the detectors find in `text` itself."""
        return self.secrets | detect(text)

    def mask(self, text: str) -> str:
        """`text` with every known secret, and every secret detected in it, masked."""
        if not text:
            return text
        return mask_text(text, self.with_text(text))

    def leaks(self, text: str) -> list[Leak]:
        """Every stretch of `text` that shares OVERLAP or more normalised characters with a secret."""
        if not text or not (self._grams[0] or self._grams[1]):
            return []
        found: list[Leak] = []
        for keep, index in ((True, self._grams[0]), (False, self._grams[1])):
            if not index:
                continue
            form, where = _normalised(text, keep)
            for i in range(len(form) - OVERLAP + 1):
                kind = index.get(form[i : i + OVERLAP])
                if kind is not None:
                    found.append(Leak(kind, where[i], where[i + OVERLAP - 1] + 1))
        return _merge(found)

    def scrub(self, text: str) -> str:
        """`text` masked, and every leaking stretch replaced by a mask: safe to show or store."""
        text = self.mask(text)
        for leak in reversed(self.leaks(text)):
            text = text[: leak.start] + MASK.format(kind=leak.kind) + text[leak.end :]
        return text

    def mask_known(self, text: str) -> str:
        """`text` with the known secrets masked, and nothing else: what a quote may go through and
        still be verified by the mask rule (which masks the stored line with the same values)."""
        if not text or not self.secrets:
            return text
        found = spans(text, self.secrets)
        return render(text, found, 0, len(text)) if found else text

    def scrub_json(self, value: Any) -> Any:
        """`scrub` applied to every string of a JSON-like value (dict keys included)."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {self.scrub(str(k)): self.scrub_json(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.scrub_json(v) for v in value]
        return value

    def check(self, text: str) -> list[str]:
        """Reasons, naming kinds and sizes only, why `text` may not leave (empty when it may)."""
        out = []
        still = spans(text, self.secrets)
        if still:
            out.append("holds a secret found in this batch's transcripts ("
                       + ", ".join(sorted({s.kind for s in still})) + ")")
        for leak in self.leaks(text):
            out.append(f"holds {leak.end - leak.start} characters that match a secret ({leak.kind}) found in this "
                       "batch's transcripts once case, digits and separators are set aside")
        return out


def _merge(leaks: list[Leak]) -> list[Leak]:
    leaks.sort(key=lambda lk: (lk.start, lk.end))
    out: list[Leak] = []
    for lk in leaks:
        if out and lk.start <= out[-1].end:
            last = out[-1]
            out[-1] = Leak(last.kind, last.start, max(last.end, lk.end))
        else:
            out.append(lk)
    return out
