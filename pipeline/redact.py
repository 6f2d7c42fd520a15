"""Secrets never reach the corpus: API keys, tokens, private keys, passwords in URLs and people's
e-mail addresses are masked.

Applied to claims, gists, entities, task statements and commit messages alike. A redacted evidence
quote no longer matches its transcript verbatim, so callers record that it was redacted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Each pattern names what it catches; the replacement keeps that name so a reviewer sees what was there.
PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("private-key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)", re.S)),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    ("openai-key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b")),
    ("aws-secret-key", re.compile(
        r"(?i)(aws_secret_access_key|aws-secret-access-key|secret_access_key)(\s*[=:]\s*[\"']?)[A-Za-z0-9/+=]{40}")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("slack-webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/]+")),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    ("bearer-token", re.compile(r"(?i)\b(bearer)(\s+)[A-Za-z0-9_\-\.=:+/]{16,}")),
    ("url-password", re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s:/@]+:)([^\s@/]+)(@)")),
    # A person's address; service senders (git@host, noreply@…) identify nobody and stay readable.
    ("email", re.compile(r"(?i)\b(?!(?:git|no-?reply|donotreply)@)[a-z0-9._%+\-]+@[a-z0-9\-]+(?:\.[a-z0-9\-]+)*\.[a-z]{2,}\b")),
]


@dataclass(frozen=True)
class Redaction:
    text: str
    kinds: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.kinds)


def _mask(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def redact(text: str) -> Redaction:
    kinds: list[str] = []
    for kind, pattern in PATTERNS:
        def sub(m: re.Match[str], kind: str = kind) -> str:
            kinds.append(kind)
            if kind == "url-password":
                return f"{m.group(1)}{_mask(kind)}{m.group(3)}"
            if kind in ("aws-secret-key", "bearer-token"):
                return f"{m.group(1)}{m.group(2)}{_mask(kind)}"
            return _mask(kind)

        text = pattern.sub(sub, text)
    return Redaction(text, tuple(dict.fromkeys(kinds)))


def redacted(text: str) -> str:
    return redact(text).text


def find_secrets(text: str) -> list[str]:
    """The kinds of secret still present in `text` (the render gate's last check)."""
    found = []
    for kind, pattern in PATTERNS:
        for m in pattern.finditer(text):
            if "[REDACTED:" not in m.group(0):
                found.append(kind)
                break
    return found
