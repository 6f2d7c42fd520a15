"""Secrets in transcript text: where they are and what kind they are.

Detection runs on the raw transcript (a line's text, or each string value of a JSON line), never on
what an engine made of it. Two sources of detectors:

* Yelp's `detect-secrets` plugins (AWS, Azure, GitHub, GitLab, Slack, Stripe, Twilio, SendGrid, npm,
  PyPI, JWTs, private keys, basic-auth URLs, `password = …` assignments, high-entropy strings, …),
  called through `analyze_string` only, which never verifies a key over the network;
* our own patterns for what it misses: OpenAI `sk-proj-…` keys without the legacy marker,
  Anthropic `sk-ant-…` keys, Google API keys, bearer tokens, AWS secret keys written without quotes,
  whole private-key blocks (detect-secrets only flags the header), people's e-mail addresses.

The high-entropy rule is tuned on real transcripts, which are full of long random-looking strings
that are not secrets: git SHAs and other hex hashes, UUIDs, tool-call and message ids, base64
images, Codex `encrypted_content` and Claude thinking signatures. Those are left alone (see
`_high_entropy`).

A detection is a `Secret(kind, value)`. Masking a text replaces every occurrence of a known value
(and of its JSON-escaped form) by `[REDACTED:kind]`, so the same secrets can be masked in a raw JSON
line, in one of its decoded strings, or in a slice of either. Nothing here touches the network or
any stage of the pipeline.
"""

from __future__ import annotations

import functools
import json
import math
import re
import string
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from detect_secrets.filters.heuristic import is_potential_uuid, is_sequential_string
from detect_secrets.plugins import keyword as ds_keyword
from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import BasePlugin
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import KeywordDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

__all__ = [
    "KINDS",
    "MASK",
    "Secret",
    "SecretsSummary",
    "Span",
    "detect",
    "detector_fingerprint",
    "line_secrets",
    "mask",
    "mask_window",
    "render",
    "spans",
    "summarise_lines",
]

MASK = "[REDACTED:{kind}]"
# Any mask, as it appears in redacted text.
MASK_RE = re.compile(r"\[REDACTED:([a-z0-9\-]+)\]")


@dataclass(frozen=True, order=True)
class Secret:
    """One detected secret: its kind (the name shown in the mask) and its exact value.

    `before` and `after`, when set, are the characters that must surround the value for an
    occurrence to count: a password read from `user:checkout@host` is masked there, not in every
    `checkout-api` of the transcript.
    """

    kind: str
    value: str
    before: str = ""
    after: str = ""


@dataclass(frozen=True)
class Span:
    """Where a secret sits in one text: [start, end) in characters."""

    start: int
    end: int
    kind: str


# Every kind, most specific first: when two detections overlap, the earlier kind names the mask.
KINDS: tuple[str, ...] = (
    "private-key",
    "anthropic-key",
    "openai-key",
    "aws-access-key",
    "aws-secret-key",
    "azure-storage-key",
    "github-token",
    "gitlab-token",
    "slack-webhook",
    "slack-token",
    "stripe-key",
    "google-api-key",
    "twilio-key",
    "sendgrid-key",
    "mailchimp-key",
    "npm-token",
    "pypi-token",
    "discord-token",
    "telegram-token",
    "square-token",
    "artifactory-token",
    "cloudant-credential",
    "ibm-cloud-key",
    "ibm-cos-key",
    "softlayer-key",
    "bearer-token",
    "jwt",
    "url-password",
    "password",
    "email",
    "high-entropy",
)
_RANK = {kind: i for i, kind in enumerate(KINDS)}

# Characters a token-shaped secret is made of: a detection that stops inside a run of these (a
# pattern that matches a fixed-length prefix of a longer key) is widened to the whole run.
_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "_-")
# Kinds whose value is not a single token (a block, an address, a password after a keyword).
_NOT_TOKENS = frozenset({"private-key", "email", "password", "url-password", "slack-webhook"})


_KEY_PREFIX = re.compile(r"^(?:sk-(?:ant-(?:[a-z]+\d\d-)?|proj-|svcacct-|admin-)?|bearer\s+)", re.I)


def _random_looking(value: str) -> bool:
    """Generated, not written: digits and letters mixed, and either one unbroken run (a hex or
    alphanumeric key) or mixed case. `sk-super-secret-key-12345` in a test fixture is words."""
    tail = _KEY_PREFIX.sub("", value)
    if not (any(c.isdigit() for c in tail) and any(c.isalpha() for c in tail)):
        return False
    return "-" not in tail or (any(c.islower() for c in tail) and any(c.isupper() for c in tail))


# -- our own patterns -------------------------------------------------------------------------------
# A key may start a string, follow punctuation, or follow a JSON escape such as \n in a raw line.
_START = r"(?:(?<![A-Za-z0-9_\-])|(?<=\\[nrt]))"

_OWN: tuple[tuple[str, re.Pattern[str], int], ...] = (
    # The whole block, in decoded text (real newlines) or in a raw JSON line (\n escapes).
    ("private-key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        re.S), 0),
    ("anthropic-key", re.compile(_START + r"(sk-ant-[A-Za-z0-9_\-]{20,})"), 1),
    ("openai-key", re.compile(_START + r"(sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,})"), 1),
    ("aws-secret-key", re.compile(
        r"(?i)aws_?secret_?(?:access_?)?key[\"'\]]{0,2}\s*(?:=|:|:=|=>)\s*[\"']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"), 1),
    ("google-api-key", re.compile(r"AIza[0-9A-Za-z_\-]{35}"), 0),
    ("slack-webhook", re.compile(r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/]+"), 0),
    ("bearer-token", re.compile(r"(?i)\bbearer\s+([A-Za-z0-9_\-.=:+/]{16,})"), 1),
    ("url-password", re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s:/@\"'\\]+:([^\s@/\"'\\]+)@"), 1),
)

# A person's address. Service and role senders (git@host, noreply@…, support@…, api@…) and the reserved example domains
# (RFC 2606: example.com, *.test, …) identify nobody and stay readable; a "domain" ending in a file
# extension is a file name (icon@2x.png), not an address. An address may start right after a JSON escape
# (`\n`, `\t`, `\r` in a raw line or a doubly encoded value), but the escape's letter is not part of it: `\ngit@github.com`
# is git@github.com, not an address "ngit@…", and `\n@app.route` is a decorator. Where an address is only part of
# something else (an scp-style git remote `user@host:path`, a URL's user or a service account inside a URL) it
# names an account on a machine, not a person: `_address_of_a_machine` leaves those out.
_EMAIL = re.compile(
    r"(?i)(?:(?<=\\[ntr])|(?<=mailto:)|(?<![A-Za-z0-9._%+\-:/\\]))"
    r"(?!(?:git|no-?reply|do-?not-?reply|mailer-daemon|postmaster|hostmaster|webmaster|"
    r"abuse|api|support|info|help|contact|security|privacy|hello|sales|press|notifications?)@)"
    r"(?![^@\s]*@(?:[a-z0-9\-]+\.)*(?:example\.(?:com|org|net)|[a-z0-9\-]+\.(?:example|test|invalid|localhost))\b)"
    r"[a-z0-9][a-z0-9._%+\-]*@[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?)*"
    r"\.(?!(?:png|jpe?g|gif|svg|webp|ico|js|mjs|cjs|ts|tsx|jsx|json|md|py|rb|go|rs|css|scss|html?|txt|"
    r"lock|ya?ml|toml|sh|zip|gz|tar|pdf|wasm|map|vue|svelte)\b)[a-z]{2,24}\b"
)

# Values that stand for a secret without being one: placeholders, references, masks.
_PLACEHOLDER = re.compile(
    r"(?i)^(?:\$|%|<|\{|\*{3,}|x{4,}|\.{3,}|…)|\$\{|\{\{|<[a-z_\-]+>|\[REDACTED|"
    r"^(?:password|passwd|pass|pwd|secret|changeme|change-me|example|none|null|nil|undefined|true|false|"
    r"your[_\-]?\w*|my[_\-]?\w*|dummy\w*|test|testing|placeholder|redacted|hidden|masked)$"
)


def _placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.search(value))


# -- detect-secrets plugins --------------------------------------------------------------------------
# The four non-ASCII letters that a case-insensitive Python regex pairs with ASCII ones (İ and ı
# with i, ſ with s, the Kelvin sign with k; tests/secrets/test_prefilter.py lists them from `re`).
_ASCII_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


def _fold(text: str) -> str:
    """`text` lower-cased, those four letters first turned into their ASCII partners: a text that a
    case-insensitive pattern of ASCII letters matches holds the pattern's literals, lower-cased,
    in its folded form. (`str.lower` alone turns İ into two characters and leaves ſ as it is.)"""
    return text.lower() if text.isascii() else text.translate(_ASCII_FOLD).lower()


@dataclass(frozen=True)
class _Hint:
    """What must occur in a text for a detector to have a chance: `pattern` (a regex, searched in
    the text), or one of the lower-case `words` in the lower-cased text. Most strings of a
    transcript hold neither, so the detectors themselves rarely run.

    `needles` is the cheap pre-filter in front of a pattern that has no literal start (which the
    regex engine would try at every position): literals, one of which occurs in every match of
    the pattern, looked for with `in` before the pattern is searched. A hint for a plugin that
    ignores case is `folded`: its pattern and needles are written in lower case and looked for in
    the folded text `low` (see `_fold`), which a regex finds much faster than one ignoring case.
    tests/secrets/test_prefilter.py checks that a needle never turns down a text the pattern
    matches, nor a hint a text its plugin flags."""

    pattern: re.Pattern[str] | None = None
    words: tuple[str, ...] = ()
    needles: tuple[str, ...] = ()
    folded: bool = False

    def holds(self, text: str, low: str) -> bool:
        if self.pattern is not None:
            hay = low if self.folded else text
            if self.needles:
                for needle in self.needles:
                    if needle in hay:
                        break
                else:
                    return False
            return self.pattern.search(hay) is not None
        for word in self.words:
            if word in low:
                return True
        return False


def _hint(pattern: str | None = None, *, lower: tuple[str, ...] = (), needles: tuple[str, ...] = (),
          folded: bool = False) -> _Hint:
    return _Hint(re.compile(pattern) if pattern else None, lower, needles, folded)


# (kind, plugin, hint): the plugin runs only on text that holds its hint, which keeps the slow
# keyword-prefixed patterns off the megabytes of text that cannot match them.
_PLUGINS: tuple[tuple[str, BasePlugin, _Hint], ...] = (
    ("aws-access-key", AWSKeyDetector(), _hint(lower=("aws", "a3t", "abia", "acca", "akia", "asia"))),
    ("azure-storage-key", AzureStorageKeyDetector(), _hint(r"AccountKey=")),
    ("url-password", BasicAuthDetector(), _hint(r"://")),
    ("cloudant-credential", CloudantDetector(), _hint(
        r"cl(?:oudant|ou)?[-_]?(?:api)?(?:key|pw|pass|token)|cloudant\.com", needles=("cl",), folded=True)),
    ("discord-token", DiscordBotTokenDetector(), _hint(r"[MNO][a-zA-Z\d_\-]{23,25}\.", needles=(".",))),
    ("github-token", GitHubTokenDetector(), _hint(r"gh[pousr]_")),
    ("gitlab-token", GitLabTokenDetector(), _hint(
        r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941", needles=("gl", "GR1348941"))),
    # These two plugins ignore case (API_KEY, SECRET_ACCESS_KEY), so their hints do too, and a
    # password may be written out (`password: …`).
    ("ibm-cloud-key", IbmCloudIamDetector(), _hint(
        r"(?:key|pwd|password|pass|token)[\"'\]]{0,2}\s*(?:=|:|:=|=>|::| )\s*[\"']?[a-z0-9_\-]{44}",
        needles=("key", "pwd", "pass", "token"), folded=True)),
    ("ibm-cos-key", IbmCosHmacDetector(), _hint(r"secret[-_]?(?:access)?[-_]?key", folded=True)),
    ("jwt", JwtTokenDetector(), _hint(r"eyJ")),
    ("mailchimp-key", MailchimpDetector(), _hint(r"-us\d")),
    ("npm-token", NpmDetector(), _hint(r"_authToken")),
    ("openai-key", OpenAIDetector(), _hint(r"T3BlbkFJ")),
    ("private-key", PrivateKeyDetector(), _hint(r"(?:BEGIN|PuTTY-User-Key-File)", needles=("BEGIN", "PuTTY-User-Key-File"))),
    ("pypi-token", PypiTokenDetector(), _hint(r"pypi-AgE")),
    ("sendgrid-key", SendGridDetector(), _hint(r"SG\.")),
    ("slack-token", SlackDetector(), _hint(lower=("xox", "hooks.slack.com"))),
    ("softlayer-key", SoftlayerDetector(), _hint(
        r"softlayer|sl[-_]?(?:api)?[-_]?(?:key|pwd|pass|token)", needles=("softlayer", "sl"), folded=True)),
    ("square-token", SquareOAuthDetector(), _hint(r"sq0csp-")),
    ("stripe-key", StripeDetector(), _hint(r"[rs]k_live_", needles=("k_live_",))),
    ("telegram-token", TelegramBotTokenDetector(), _hint(r"\d{8,10}:[0-9A-Za-z_\-]{35}", needles=(":",))),
    ("twilio-key", TwilioKeyDetector(), _hint(r"AC[a-z0-9]{32}|SK[a-z0-9]{32}", needles=("AC", "SK"))),
    ("artifactory-token", ArtifactoryDetector(), _hint(r"AKC[a-zA-Z0-9]{10}|AP[\dABCDEF][a-zA-Z0-9]{8}", needles=("AKC", "AP"))),
)
# Our own patterns need one of these.
_OWN_HINT = _hint(lower=("-----begin", "sk-", "aiza", "://", "aws", "hooks.slack.com", "bearer"))

# The keyword rule: `password = …`, `api_key: …`, `SECRET=…` (quoted as in code, or bare as in .env
# and YAML files). Run per line of text, because the plugin reports one match per pattern.
_KEYWORD = KeywordDetector()
_KEYWORD_WORDS = ("key", "pass", "pwd", "secret", "contrase")
_KEYWORD_GROUPS = (ds_keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP, ds_keyword.CONFIG_DENYLIST_REGEX_TO_GROUP)
# What a keyword's value must look like to count: a real password has a digit or a symbol, and it
# is not a code expression (a call, an attribute, a type name).
_CODE_VALUE = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*(?:\(.*\))?;?$|[()\[\]{}]|^[\d.]+$")
_KEYWORD_NAME_SKIP = re.compile(r"(?i)(?:secret|key|pass\w*)_?(?:name|names|type|types|id|ids|file|path|ref|length|len|count|"
                                r"manager|store|field|hint|prompt|label|policy|scope|version)[\"'\]]{0,2}\s*[=:]")

# -- high entropy -----------------------------------------------------------------------------------
_B64 = Base64HighEntropyString()
_ENTROPY_LIMIT = 4.5
HIGH_ENTROPY_MIN = 20
# Longer single tokens are blobs (images, encrypted reasoning, signatures), not keys.
HIGH_ENTROPY_MAX = 200
_TOKEN = re.compile(r"[A-Za-z0-9+/=_\-]+")
_HEX = re.compile(r"[0-9a-fA-F]+")
# Ids that coding agents and model APIs print everywhere: call_…, toolu_…, msg_…, req_…, resp_…, rs_…,
# and any Anthropic-style id (a short lower-case prefix, then _01 and base58: cse_01VVj…).
_ID_PREFIX = re.compile(
    r"^(?:call|toolu|srvtoolu|msg|req|resp|rs|fc|ws|file|run|thread|asst|chatcmpl|cmpl|evt|batch|ft|org|proj|user|"
    r"sess|session|conv|turn|item|step|task|agent|cache|img|ctx)[_\-]|^[a-z]{2,10}_01[1-9A-HJ-NP-Za-km-z]{18,30}$"
)
# JSON keys whose values are ids, hashes or blobs by construction.
_ID_KEYS = frozenset({
    "id", "uuid", "parentUuid", "leafUuid", "sessionId", "session_id", "requestId", "request_id", "call_id",
    "tool_use_id", "tool_call_id", "message_id", "messageId", "turn_id", "promptId", "agentId", "signature",
    "encrypted_content", "encrypted_reasoning", "data", "base64", "image_url", "sha", "hash", "commit", "etag",
    "checksum", "digest", "integrity", "nonce", "fingerprint", "parent_id", "item_id", "response_id",
})
# The key a quoted value is assigned to, just before it in a line of text: "sha": "…", commit = '…'
_KEY_BEFORE = re.compile(r"[\"']?([A-Za-z_][\w\-]*)[\"']?\s*[:=]\s*$")
_BLOB = re.compile(r"(?:data:[\w/+.\-]+;base64,)?[A-Za-z0-9+/=_\-]{" + str(HIGH_ENTROPY_MAX + 1) + ",}")
_SRI = re.compile(r"^sha(?:1|256|384|512)-")


def _entropy(value: str) -> float:
    return float(_B64.calculate_shannon_entropy(value))


def _entropy_limit(n: int) -> float:
    """detect-secrets' 4.5 bits, lowered for short strings: a random 24-character key cannot reach
    4.5 (its most is log2(24) = 4.58, its usual 4.2), so the limit follows the length below 40."""
    return min(_ENTROPY_LIMIT, 0.85 * math.log2(n))


# Runs of a word (lower case, or capitalised): identifiers are made of them, generated keys are not.
_WORDS = re.compile(r"[a-z]{4,}|[A-Z][a-z]{3,}")


def _wordy(value: str) -> bool:
    """Mostly words (`handleUserAuthentication2`, `PostgresConnectionPool9x`): an identifier."""
    return sum(len(w) for w in _WORDS.findall(value)) > 0.7 * len(value)


def _high_entropy_value(value: str, key: str | None) -> bool:
    """True when a quoted or whole-string token looks like a generated secret, and like nothing a
    transcript is full of (hashes, ids, blobs, paths)."""
    n = len(value)
    if n < HIGH_ENTROPY_MIN or n > HIGH_ENTROPY_MAX:
        return False
    if key is not None and key in _ID_KEYS:
        return False
    if _HEX.fullmatch(value) or is_potential_uuid(value) or is_sequential_string(value):
        return False
    if _ID_PREFIX.match(value) or _SRI.match(value) or value.startswith("gAAAA"):
        return False
    # Generated keys mix upper and lower case with digits; paths, words and identifiers rarely do all three.
    if not (any(c.isdigit() for c in value) and any(c.islower() for c in value) and any(c.isupper() for c in value)):
        return False
    if "/" in value and (value[0] in "/~." or "_" in value or "." in value
                         or max(len(p) for p in value.split("/")) < HIGH_ENTROPY_MIN):
        return False  # a path: /home/ana/src/plugin_check, src/components/UserProfile/index.tsx
    if _wordy(value):
        return False
    return _entropy(value) > _entropy_limit(n)


def _high_entropy(text: str, key: str | None) -> Iterator[str]:
    # The whole string value of a JSON field, when it is one token ("apiKey": "Xk3…").
    if key is not None and HIGH_ENTROPY_MIN <= len(text) <= HIGH_ENTROPY_MAX and _TOKEN.fullmatch(text):
        if _high_entropy_value(text, key):
            yield text
        return
    # Quoted tokens inside a text (code, shell, config files), as detect-secrets finds them.
    if len(text) > HIGH_ENTROPY_MAX and ('"' in text or "'" in text):
        for m in _B64.regex.finditer(text):
            value = m.group(2)
            if HIGH_ENTROPY_MIN <= len(value) <= HIGH_ENTROPY_MAX:
                before = _KEY_BEFORE.search(text, max(0, m.start() - 60), m.start())
                if _high_entropy_value(value, before.group(1) if before else None):
                    yield value
    elif '"' in text or "'" in text:
        for m in _B64.regex.finditer(text):
            value = m.group(2)
            before = _KEY_BEFORE.search(text, max(0, m.start() - 60), m.start())
            if _high_entropy_value(value, before.group(1) if before else None):
                yield value


# -- detection ---------------------------------------------------------------------------------------
def _widen(text: str, start: int, end: int) -> tuple[int, int]:
    """Grow [start, end) to the whole run of key characters it sits in: a pattern that matched a
    fixed-length prefix of a longer key must not leave the rest of it readable. Never across `=`
    on the left (NAME=value), nor across a JSON escape (\\nAKIA…)."""
    while end < len(text) and text[end] in _TOKEN_CHARS:
        end += 1
    while end < len(text) and text[end] == "=":
        end += 1  # base64 padding
    while start > 0 and text[start - 1] in _TOKEN_CHARS and not (start >= 2 and text[start - 2] == "\\"):
        start -= 1
    # A dash at the end is punctuation ("…key sk_live_abc- and").
    while end > start and text[end - 1] == "-":
        end -= 1
    return start, end


def _add(found: dict[str, str], kind: str, value: str) -> None:
    """Keep the most specific kind for a value found by several detectors."""
    value = value.strip()
    if len(value) < 6:
        return
    old = found.get(value)
    if old is None or _RANK[kind] < _RANK[old]:
        found[value] = kind


# Kinds whose value is masked only where it appears in the same setting as it was found in, unless
# it looks generated: a URL's password is often a plain word (the user name again, the app's name).
_IN_CONTEXT: dict[str, tuple[str, str]] = {"url-password": (":", "@")}


def _secret(kind: str, value: str) -> Secret:
    if kind in _IN_CONTEXT and not _random_looking(value):
        before, after = _IN_CONTEXT[kind]
        return Secret(kind, value, before, after)
    return Secret(kind, value)


def _add_at(found: dict[str, str], text: str, kind: str, value: str) -> None:
    """A value a plugin reported: widened to the token it sits in, wherever it occurs in `text`."""
    if kind in _NOT_TOKENS:
        _add(found, kind, value)
        return
    at = text.find(value)
    seen: set[str] = set()
    while at >= 0:
        a, b = _widen(text, at, at + len(value))
        whole = text[a:b]
        if whole not in seen:
            seen.add(whole)
            _add(found, kind, whole)
        at = text.find(value, at + len(value))


def _keyword_values(text: str) -> Iterator[str]:
    for line in text.split("\n"):
        low = _fold(line)
        if not any(w in low for w in _KEYWORD_WORDS) or _KEYWORD_NAME_SKIP.search(line):
            continue
        for group in _KEYWORD_GROUPS:
            for value in _KEYWORD.analyze_string(line, denylist_regex_to_group=group):
                # An unquoted value ends at the first blank (`PASSWORD=x1y2 written to .env`).
                parts = value.strip().split()
                value = parts[0].strip("\"'`,;") if parts else ""
                # A written password has a digit or a symbol; `secret-password` in a fixture has neither.
                if (6 <= len(value) <= 200 and not _placeholder(value)
                        and not _CODE_VALUE.search(value)
                        and any(c.isdigit() or not (c.isalnum() or c in "-_.") for c in value)):
                    yield value


def detect(text: str, key: str | None = None) -> set[Secret]:
    """Every secret in one piece of text. `key` is the JSON field the text is the value of, if any:
    ids, hashes and blobs are recognised by it."""
    if not text or len(text) < 6:
        return set()
    if "[REDACTED:" in text:
        # Text that was masked already: a mask is not part of any secret (https://[REDACTED:…]@host
        # holds no URL password), so masks read as blanks of the same length.
        text = MASK_RE.sub(lambda m: " " * len(m.group(0)), text)
    found: dict[str, str] = {}
    low = _fold(text)
    _tokens(text, low, found)
    if "@" in text:
        for m in _EMAIL.finditer(text):
            if not _address_of_a_machine(text, m.start(), m.end()):
                _add(found, "email", m.group(0))
    if any(w in low for w in _KEYWORD_WORDS):
        for value in _keyword_values(text):
            _add_at(found, text, "password", value)
    for value in _high_entropy(text, key):
        _add(found, "high-entropy", value)
    return {_secret(kind, value) for value, kind in found.items()}


# Where a word ends, for the URL an address may sit in (quotes, brackets and spaces end a URL in prose).
_URL_START = re.compile(r"(?i)[a-z][a-z0-9+.\-]*://[^\s\"'<>()\[\]{}`]*$")


def _address_of_a_machine(text: str, start: int, end: int) -> bool:
    """An address match that is part of a git remote or a URL rather than an address of its own:
    `user@host:path` (scp-style remote: a path right after the colon, not a space) or any address inside
    a URL (`https://ci.host/job?account=deploy-bot@corp.io`, the query of a service account)."""
    if end < len(text) and text[end] == ":" and end + 1 < len(text) and (text[end + 1].isalnum() or text[end + 1] in "~/._-"):
        return True
    return bool(_URL_START.search(text, max(0, start - 400), start))


def _tokens(text: str, low: str, found: dict[str, str]) -> None:
    """Our own patterns, and the detect-secrets plugins whose hint `text` holds."""
    for kind, pattern, group in _OWN if _OWN_HINT.holds(text, low) else ():
        for m in pattern.finditer(text):
            value = m.group(group)
            if kind in ("openai-key", "anthropic-key", "bearer-token") and not _random_looking(value):
                continue
            if kind == "url-password" and _placeholder(value):
                continue
            if kind in _NOT_TOKENS:
                _add(found, kind, value)
            else:
                a, b = _widen(text, m.start(group), m.end(group))
                _add(found, kind, text[a:b])
    for kind, plugin, hint in _PLUGINS:
        if not hint.holds(text, low):
            continue
        for value in plugin.analyze_string(text):
            if not value:
                continue
            if kind == "url-password" and _placeholder(value):
                continue
            if kind == "private-key":
                continue  # the header only; our own pattern masks the whole block
            _add_at(found, text, kind, value)


def _leaves(value: Any, key: str | None = None) -> Iterator[tuple[str | None, str]]:
    """(field name, string) for every string value of a parsed JSON document, and for the strings
    of a string value that is itself a JSON document (Codex tool-call arguments)."""
    stack: list[tuple[str | None, Any]] = [(key, value)]
    while stack:
        k, item = stack.pop()
        if isinstance(item, str):
            if item[:1] in ("{", "[") and len(item) > 1:
                try:
                    inner = json.loads(item)
                except (ValueError, RecursionError):
                    inner = None
                if isinstance(inner, (dict, list)):
                    stack.append((k, inner))
                    continue
            yield k, item
        elif isinstance(item, dict):
            stack.extend((str(k2), v) for k2, v in item.items())
        elif isinstance(item, list):
            stack.extend((k, v) for v in item)


def _is_blob(value: str) -> bool:
    return len(value) > HIGH_ENTROPY_MAX and _BLOB.fullmatch(value) is not None


@functools.cache
def detector_fingerprint() -> str:
    """What a stored scan was made with: these rules (this file) and detect-secrets' version. A
    scan kept in the warehouse under another fingerprint is made again."""
    import hashlib
    from importlib.metadata import version
    from pathlib import Path

    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(version("detect-secrets").encode())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=8192)
def line_secrets(raw: str) -> frozenset[Secret]:
    """The secrets of one transcript line. A JSON line is read value by value (decoded, with the
    field name as context, images and encrypted blobs skipped); any other line as it is."""
    stripped = raw.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            parsed = json.loads(raw)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, (dict, list)):
            found: set[Secret] = set()
            for key, value in _leaves(parsed):
                if len(value) < 6 or (key in _ID_KEYS and len(value) <= HIGH_ENTROPY_MAX) or _is_blob(value):
                    continue
                found |= detect(value, key)
            return frozenset(found)
    return frozenset(detect(raw))


# -- masking -----------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def _forms(value: str) -> tuple[str, ...]:
    """The value as it may be written: itself, and JSON-escaped (as in a raw line)."""
    escaped = json.dumps(value, ensure_ascii=False)[1:-1]
    return tuple(dict.fromkeys((value, escaped, json.dumps(value)[1:-1], escaped.replace("/", "\\/"))))


def spans(text: str, secrets: Iterable[Secret]) -> list[Span]:
    """Where the given secrets occur in `text`: sorted, overlapping occurrences merged into one
    span named by the most specific kind."""
    raw: list[Span] = []
    for s in secrets:
        for form in _forms(s.value):
            if not form:
                continue
            needle = s.before + form + s.after
            at = text.find(needle)
            while at >= 0:
                start = at + len(s.before)
                raw.append(Span(start, start + len(form), s.kind))
                at = text.find(needle, at + len(needle))
    if not raw:
        return []
    raw.sort(key=lambda sp: (sp.start, -sp.end))
    merged: list[Span] = []
    for sp in raw:
        if merged and sp.start < merged[-1].end:
            last = merged[-1]
            kind = last.kind if _RANK.get(last.kind, 99) <= _RANK.get(sp.kind, 99) else sp.kind
            merged[-1] = Span(last.start, max(last.end, sp.end), kind)
        else:
            merged.append(sp)
    return merged


def render(text: str, found: list[Span], start: int, end: int) -> str:
    """text[start:end] with the given spans (from `spans(text, …)`) masked."""
    out: list[str] = []
    at = start
    for sp in found:
        if sp.end <= start or sp.start >= end:
            continue
        a = max(sp.start, start)
        out.append(text[at:a])
        # A secret cut by the window edge is masked all the same: none of it is shown.
        out.append(MASK.format(kind=sp.kind))
        at = min(sp.end, end)
    out.append(text[at:end])
    return "".join(out)


def mask(text: str, secrets: Iterable[Secret] | None = None) -> str:
    """`text` with every occurrence of the secrets replaced by `[REDACTED:kind]` (by default the
    secrets detected in `text` itself)."""
    found = spans(text, detect(text) if secrets is None else secrets)
    return render(text, found, 0, len(text)) if found else text


def mask_window(text: str, start: int, end: int, secrets: Iterable[Secret]) -> str:
    """The slice text[start:end] as it reads with the secrets of the whole `text` masked: a secret
    that straddles an edge is masked too, so no part of it shows."""
    start, end = max(0, start), min(len(text), end)
    if start >= end:
        return ""
    found = spans(text, secrets)
    return render(text, found, start, end) if found else text[start:end]


# -- what a set of lines holds ------------------------------------------------------------------------
@dataclass(frozen=True)
class SecretsSummary:
    """What detection found on a set of transcript lines, and how much of it masking hides."""

    lines: int
    bytes: int
    seconds: float
    found: dict[str, int]  # distinct secrets, per kind
    masked: dict[str, int]  # occurrences masked in the stored lines, per kind

    def line(self) -> str:
        """One line for a person (make check-real): found and masked per kind, size and speed."""
        mb = self.bytes / 1e6
        rate = f", {mb / self.seconds:.1f} MB/s" if self.seconds > 0 else ""
        if not self.found:
            return f"secrets: none found in {self.lines:,} lines ({mb:.1f} MB, {self.seconds:.1f} s{rate})"
        kinds = ", ".join(f"{k} {self.found[k]}/{self.masked.get(k, 0)}" for k in sorted(self.found))
        return (f"secrets: {sum(self.found.values())} found, {sum(self.masked.values())} occurrences masked "
                f"(per kind, found/masked: {kinds}) in {self.lines:,} lines ({mb:.1f} MB, {self.seconds:.1f} s{rate})")

    def to_json(self) -> dict[str, object]:
        return {"lines": self.lines, "bytes": self.bytes, "seconds": round(self.seconds, 3),
                "found": self.found, "masked": self.masked}


def summarise_lines(read: Callable[[], Iterable[str]]) -> SecretsSummary:
    """Secrets found (distinct, per kind) and occurrences masked (per kind) on the lines `read()`
    yields; it is called twice: once to detect, once to count every place a found value sits."""
    began = time.perf_counter()
    found: set[Secret] = set()
    lines = size = 0
    for text in read():
        lines += 1
        size += len(text.encode("utf-8", "surrogatepass"))
        found |= line_secrets(text)
    masked: Counter[str] = Counter()
    if found:
        for text in read():
            masked.update(sp.kind for sp in spans(text, found))
    return SecretsSummary(
        lines=lines, bytes=size, seconds=time.perf_counter() - began,
        found=dict(sorted(Counter(s.kind for s in found).items())), masked=dict(sorted(masked.items())),
    )
