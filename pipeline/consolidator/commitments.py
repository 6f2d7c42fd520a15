"""First-person commitments in what the user or the agent said: the rules engine's commitments.

Only user and agent text is read, never tool output. A sentence qualifies when its speaker commits
themselves to future work ("I'll …", "I will …", "we'll …", "I'm going to …", "let me … later").
Questions, conditionals and hypotheticals, negations and work announced for right now are left out;
finished work and other people's plans never match a first-person future. The agent narrates its
next step all the time ("I'll check the logs"), so an agent sentence counts only when it defers
the work (after, once, before, later, a date). `resolved` is set when a later message of the same
session reports the same work done; `dueHint` only when the sentence itself names an ISO date.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.consolidator.contract import MAX_QUOTE_CHARS, is_question

__all__ = ["CommitmentFinding", "Message", "commitment_entry", "find_commitments", "sentences", "tidy_statement"]


@dataclass(frozen=True)
class Message:
    """What the user or the agent said on one line (text blocks only, no tool output)."""

    session_id: str
    line_no: int
    role: str
    text: str
    at: dt.datetime | None = None  # when it was said; orders messages across sessions


_APOS = "['’]"
_FIRST_PERSON = re.compile(
    rf"\b(?P<who>I{_APOS}ll|I will|I am going to|I{_APOS}m going to|[Ww]e{_APOS}ll|[Ww]e will|"
    rf"[Ww]e are going to|[Ww]e{_APOS}re going to|[Ll]et me)\s+(?P<rest>\S.*)$"
)
_NOT = re.compile(r"^(?:not|never)\b", re.IGNORECASE)
_CONDITIONAL = re.compile(
    r"\b(?:if|unless|would|could|might|maybe|perhaps|probably|in case|suppose|supposing|whether)\b", re.IGNORECASE
)
# Work announced for right now is the session doing its job, not something that outlives it.
_IMMEDIATE = re.compile(
    r"\b(?:now|right away|immediately|first|in a (?:moment|sec(?:ond)?|minute)|quickly|"
    r"next(?!\s+(?:week|month|sprint|release|quarter|year|time|session|night)))\b",
    re.IGNORECASE,
)
# A deferral: the work is promised for later than this turn.
_DEFERRED = re.compile(
    r"\b(?:after|once|before|later|tomorrow|tonight|until|when|follow[- ]up|separate (?:PR|change|commit)|"
    r"next (?:week|month|sprint|release|quarter|year|time|session)|by (?:monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday|the end|end of|eod)|on (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"|\d{4}-\d{2}-\d{2})\b",
    re.IGNORECASE,
)
_LATER = re.compile(r"\b(?:later|tomorrow|tonight|next (?:week|month|sprint|time|session))\b", re.IGNORECASE)
_ISO_DAY = re.compile(r"(?<!\d)(\d{4}-\d{2}-\d{2})(?!\d)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|;\s+")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_FILLER = {"also", "just", "then", "still", "probably", "definitely", "personally", "myself", "quickly", "go", "try", "and"}
_STOP = {
    "the", "and", "for", "with", "this", "that", "these", "those", "before", "after", "once", "when", "then",
    "you", "your", "our", "out", "into", "from", "its", "it's", "are", "was", "were", "will", "can", "lands",
    "myself", "tell", "until", "later", "tomorrow", "what", "which", "there", "here", "some", "all", "any",
    "finish", "close", "case", "done", "up", "about", "over", "again", "too", "also", "just", "not",
}
_IRREGULAR = {
    "run": "ran", "write": "wrote", "make": "made", "do": "did", "send": "sent", "put": "put", "set": "set",
    "get": "got", "take": "took", "build": "built", "tell": "told", "find": "found", "keep": "kept",
    "leave": "left", "begin": "began", "split": "split", "cut": "cut", "read": "read", "rebuild": "rebuilt",
    "rewrite": "rewrote", "undo": "undid", "go": "went", "give": "gave", "bring": "brought",
}
_PARTICIPLE = {"write": "written", "do": "done", "take": "taken", "rewrite": "rewritten", "give": "given", "go": "gone"}


def sentences(text: str) -> list[str]:
    """Sentences (and semicolon clauses) of a message, each a substring of `text`."""
    out: list[str] = []
    for line in text.split("\n"):
        for part in _SENTENCE_END.split(line):
            part = part.strip()
            if part:
                out.append(part)
    return out


def _past_forms(verb: str) -> set[str]:
    v = verb.lower()
    forms = {v + "ed", v + "d" if v.endswith("e") else v + "ed"}
    if v.endswith("y") and len(v) > 2 and v[-2] not in "aeiou":
        forms.add(v[:-1] + "ied")
    if re.fullmatch(r"[^aeiou]*[aeiou][bdgklmnprt]", v):  # stop → stopped, ship → shipped
        forms.add(v + v[-1] + "ed")
    for table in (_IRREGULAR, _PARTICIPLE):
        if v in table:
            forms.add(table[v])
    return forms


def _keywords(text: str) -> set[str]:
    words = set()
    for raw in re.split(r"[^A-Za-z0-9]+", text.lower()):
        if len(raw) >= 3 and raw not in _STOP:
            words.add(raw[:-1] if raw.endswith("s") and len(raw) > 4 else raw)
    return words


@dataclass(frozen=True)
class CommitmentFinding:
    session_id: str
    line_no: int
    role: str
    quote: str
    verb: str
    rest: str
    confidence: float
    due_hint: str | None
    resolved_at: int | None = None
    resolved_in: str | None = None  # the session of that line, when another session of the project reports it done

    @property
    def actor(self) -> str:
        return "agent" if self.role == "assistant" else "user"


def _due_hint(sentence: str) -> str | None:
    for day in _ISO_DAY.findall(sentence):
        try:
            dt.date.fromisoformat(day)
        except ValueError:
            continue
        return day
    return None


def _commitment_in(sentence: str, message: Message) -> CommitmentFinding | None:
    if is_question(sentence):
        return None  # a question commits nobody
    match = _FIRST_PERSON.search(sentence)
    if match is None:
        return None
    who, rest = match.group("who"), match.group("rest")
    let_me = who.lower() == "let me"
    if _NOT.match(rest) or _CONDITIONAL.search(sentence) or _IMMEDIATE.search(rest):
        return None
    if let_me and not _LATER.search(rest):
        return None  # "let me look at X" is the next step, not a promise
    if message.role == "assistant" and not _DEFERRED.search(rest):
        return None  # the agent narrating what it does next
    words = _WORD.findall(rest)
    verbs = [w for w in words if w.lower() not in _FILLER]
    if not verbs:
        return None
    due = _due_hint(sentence)
    confidence = 0.8 if who[0] == "I" else 0.6
    if let_me:
        confidence = 0.55
    if due:
        confidence += 0.05
    quote = sentence[match.start() :]
    return CommitmentFinding(
        session_id=message.session_id,
        line_no=message.line_no,
        role=message.role,
        quote=quote[:MAX_QUOTE_CHARS].rstrip(),
        verb=verbs[0].lower(),
        rest=rest,
        confidence=round(min(confidence, 0.9), 2),
        due_hint=due,
    )


def _resolution(finding: CommitmentFinding, later: Sequence[Message]) -> Message | None:
    """The first of the `later` messages that reports this work done, if any."""
    forms = _past_forms(finding.verb)
    wanted = _keywords(finding.rest) - {finding.verb}
    need = 2 if len(wanted) >= 3 else 1
    pattern = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, forms))) + r")\b", re.IGNORECASE)
    for message in later:
        for sentence in sentences(message.text):
            if is_question(sentence) or _FIRST_PERSON.search(sentence):
                continue
            if pattern.search(sentence) and len(wanted & _keywords(sentence)) >= need:
                return message
    return None


def _is_injected_context(text: str) -> bool:
    # Harness-injected user messages (AGENTS.md, environment context, command output) are wrapped
    # in tags; nobody speaks in them.
    stripped = text.lstrip()
    return stripped.startswith("<") and ">" in stripped[:80]


def _later_in_project(
    message: Message, by_session: Mapping[str, list[Message]], slugs: Mapping[str, str | None]
) -> list[Message]:
    """Messages of the project's other sessions said after `message`, in time order."""
    slug = slugs.get(message.session_id)
    if slug is None or message.at is None:
        return []
    after = [
        m for sid, said in by_session.items() if sid != message.session_id and slugs.get(sid) == slug
        for m in said if m.at is not None and m.at > message.at
    ]
    return sorted(after, key=lambda m: (m.at, m.session_id, m.line_no))


def find_commitments(
    messages: Sequence[Message],
    new_from_line: Mapping[str, int] | None = None,
    slugs: Mapping[str, str | None] | None = None,
) -> list[CommitmentFinding]:
    """First-person commitments in user and agent text, in transcript order.

    A commitment counts as resolved when a later message reports the work done: in the same
    session, or (given `slugs`) in a later session of the same project. A commitment made before a
    session's `new_from_line` was reported on an earlier night; it is reported again only when new
    lines show it done, so that night's task can be closed.
    """
    new_from = new_from_line or {}
    by_session: dict[str, list[Message]] = {}
    for message in messages:
        if message.role in ("user", "assistant") and message.text and not _is_injected_context(message.text):
            by_session.setdefault(message.session_id, []).append(message)
    for said in by_session.values():
        said.sort(key=lambda m: m.line_no)
    found: list[CommitmentFinding] = []
    for sid, said in by_session.items():
        for i, message in enumerate(said):
            for sentence in sentences(message.text):
                finding = _commitment_in(sentence, message)
                if finding is None:
                    continue
                done = _resolution(finding, said[i + 1 :])
                if done is None and slugs:
                    done = _resolution(finding, _later_in_project(message, by_session, slugs))
                fresh_news = done is not None and done.line_no >= new_from.get(done.session_id, 1)
                if finding.line_no < new_from.get(sid, 1) and not fresh_news:
                    continue
                found.append(CommitmentFinding(**{
                    **finding.__dict__,
                    "resolved_at": done.line_no if done else None,
                    "resolved_in": done.session_id if done and done.session_id != sid else None,
                }))
    return found


_SECOND_PERSON = re.compile(r"\byou\b")
_THIRD_PERSON = (
    (re.compile(r"\bmyself\b"), "themselves"),
    (re.compile(r"\bourselves\b"), "themselves"),
    (re.compile(r"\bmy\b"), "their"),
    (re.compile(r"\bour\b"), "their"),
    (re.compile(r"\bwe\b"), "they"),
    (re.compile(r"\bus\b"), "them"),
)


# A request for a reminder tacked on at the end ("…, remind me", "(remind me later)") is not part of the work.
_REMINDER = re.compile(
    r"(?:\s*[,;:(\u2013\u2014-]\s*|\s+(?:and|so|please)\s+)(?:please\s+)?remind\s+(?:me|us)"
    r"(?:\s+(?:later|tomorrow|about\s+(?:it|this|that)|of\s+(?:it|this|that)|to\s+do\s+(?:it|this|that)))?"
    r"[\s).!?]*$",
    re.IGNORECASE,
)
_TRAILING_MARKS = " \t.,;:!?\u2026\u2013\u2014-"
_PAIRS = {")": "(", "]": "[", "}": "{", "\u201d": "\u201c", "\u2019": "\u2018"}


def _unbalanced_closer(text: str) -> bool:
    """Does `text` end with a quote or bracket that closes nothing inside it (a leftover of the sentence
    the statement was cut from, such as `"}]` after quoted JSON)?"""
    last = text[-1]
    if last in ('"', "`"):
        return text.count(last) % 2 == 1
    if last in _PAIRS:
        return text.count(last) > text.count(_PAIRS[last])
    return False


def tidy_statement(text: str) -> str:
    """A task statement without the leftovers of the sentence it came from: a trailing request for a
    reminder, stray punctuation, quotes or brackets that close nothing. It ends with a period when it
    ends in a word; a statement that ends in code (`f()`) or a closed quotation keeps that ending."""
    text = " ".join(text.split())
    while True:
        before = text
        text = _REMINDER.sub("", text).rstrip(_TRAILING_MARKS)
        while text and _unbalanced_closer(text):
            text = text[:-1].rstrip(_TRAILING_MARKS)
        if text == before:
            break
    if not text:
        return text
    return f"{text}." if text[-1].isalnum() else text


def _statement(finding: CommitmentFinding) -> str:
    """The commitment retold in the third person ("I'll fix X" → "The agent will fix X.")."""
    rest = finding.rest
    for pattern, replacement in _THIRD_PERSON:
        rest = pattern.sub(replacement, rest)
    rest = _SECOND_PERSON.sub("the user" if finding.actor == "agent" else "the agent", rest)
    who = "The agent" if finding.actor == "agent" else "The user"
    return tidy_statement(f"{who} will {rest}")


def commitment_entry(finding: CommitmentFinding) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "statement": _statement(finding),
        "actor": finding.actor,
        "evidence": [{"sessionId": finding.session_id, "quote": finding.quote}],
        "confidence": finding.confidence,
        "resolved": finding.resolved_at is not None,
    }
    if finding.due_hint:
        entry["dueHint"] = finding.due_hint
    return entry
