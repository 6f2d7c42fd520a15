"""Promises left outstanding: the rules engine's commitments.

Only what the user and the agent said is read, never tool output, and only what a person said:
text the harness injects (tagged blocks such as `<system-reminder>`, environment context, command
output, an IDE's "Context from my IDE setup" header before "My request for …", a compaction
summary) is skipped. A user prompt that relays another agent's words (it opens with a speaker label
naming an AI, `CLAUDE:`, `CODEX SAYS:`, `HANDSHAKE: Claude Code`, a one-letter label, or is signed
`-Claude`) speaks for that agent: its promises have actor `other`. So does what a prompt pastes from
someone else after a mail header, "On … wrote:" or a mail client's date line (an email to answer).

The phrase families (first-person future, hand-off, deferral, sequencing, offer, requirement,
immediate) are in `pipeline.consolidator.rules.promise_phrases`, for English, Chinese, Japanese, Korean,
German, French, Spanish, Russian and Portuguese. A sentence that ends in a colon introduces what
follows at once (narration) unless it names a later time; a tool call that puts a question to the
user and waits (AskUserQuestion, ExitPlanMode) ends the turn as a user message does. A sentence is a promise when it is not a question, an offer
(a contingency included: "if it still fails, tell me and I'll look"), a requirement ("we will
want/need …") or a negation, and:

* **the agent** (or a relayed agent): the turn does not go on doing it. Narration (an "I'll …"
  followed in the same turn by tool calls) is never a promise; a plain "I'll …" at the end of a
  turn is not enough either. It is a promise when
  - it defers the work beyond the turn (later, tomorrow, a follow-up, after something else lands),
    whatever follows; or
  - the turn ends with it (no tool call after it before the next user message) and it waits on the
    other party: a hand-off ("send me X, I'll Y", "sobald du …, aktualisiere ich …", "你…我就…"), or a
    sequencing word right after a sentence that asks the other party for something ("Magst du diese
    Punkte festlegen? Danach entferne ich …");
  - at the end of a turn, a list under a heading that hands work to the user ("What Logan needs to
    do:", "Next steps for you:", "你需要…") is one commitment of the user's, quoted by its first item.
* **the user**: a first-person future that defers the user's own work past the session (later,
  tonight, tomorrow, after something else lands; in any language), or takes a part of the work
  off the agent's hands to do outside it ("I'll restart the container myself and tell you when it's
  up"), or hands off. The opening words of a prompt that announce what the user is about to try
  ("I am going to run a command with a lot of output"), a prompt's statement of its stack or its
  plan ("I'll be mostly hands-off for this project"), and a delegation ("I'll let you decide") are
  the prompt's own instructions, not promises.

Promises come only from conversational text: never from tool output (it is not read), from queue or
hook records (they are not messages), from what a message quotes as code (a fenced block: pasted
documents, command lines, configuration), nor from an aside in parentheses, which neither makes
nor unmakes the promise around it ("Let me know once the scaffold exists (or if you want me to
generate it) and I'll pick up from there" is a hand-off, not an offer). The same promise said twice
in one session (a prompt sent again) is one commitment.

Work announced for right now ("now", "first", 先, jetzt, сейчас, …) is narration. `dueHint` is set
only when the sentence names an ISO date. `resolved` is set when the promise is seen kept later in
its session (or, given project slugs, in a later session of the same project), by the first of:

* **english**: a later sentence has the promise's verb in the past and its words ("I'll fix the
  parser later" … "Fixed the parser");
* **edit** (an agent's promise, same session): the promise's sentence names a file by a path with a
  folder (`specs/001/spec.md`, `E:\\a\\b\\spec.md`; a bare name like `README.md` is in every folder, so
  it names none) and a later successful tool call writes it (Write, Edit, MultiEdit, NotebookEdit,
  or a patch that adds or updates it); the paths match when one ends with the other, two parts or more;
* **run** (an agent's promise, same session): the promise's sentence names a command in a code span (a
  program and at least one more word: `npm install`, `git remote add origin <URL>` up to its
  placeholder) and later successful tool calls run every command it names;
* **report**: a later message of the promise's own side (the agent's for the agent, the user's for
  the user) has a sentence reporting work done in any of the eight languages (a completion word,
  `promise_phrases.reports_done`: "Report recorded in …", "Ich habe … aktualisiert", "Видео скачано",
  "記錄完成:" with the line it introduces; never with "not yet" beside it, never a question or a
  future) that shares two content words with the promise (words of four letters or more of the
  alphabetic scripts, compared on their first five letters, function words left out; CJK text counts
  through the Latin names it holds), or one besides the promised verb itself ("Dann fülle ich User
  Story … konkret aus" … "… konkret ausgefüllt");
* **answered** (an agent's hand-off, or a promise awaiting the user's go-ahead or choice, that ended
  its turn waiting): the user's next message gives what it waited for, a short go-ahead or report
  that the user's part is done in any of the eight languages ("figlet is done", "Implement the plan.",
  "行，那你试一下1"; `promise_phrases.go_ahead`), the link it asked for, or, for a promise that waits
  for the user's answer ("等待你的回答，然后我会…给出反馈"), any reply that does not give it up
  (`promise_phrases.turns_away`); and the agent goes on. A reply
  that asks something, says no or not yet, says something still fails (`promise_phrases.refuses`),
  or is long (the user turning to something else: "lets go ahead and push this up …") keeps the
  promise open. Commands the user ran themselves, harness notices and images are not a reply, and an
  answer that asks again for what the promise waits on keeps it open;
* **taken up**: a later message of the same side comes back to the same work (it shares two terms
  with the promise) and promises it anew, and that new promise is seen kept: the first is kept with
  it. Agents restate a promise when they ask for what it waits on ("Danach finalize ich die
  Spezifikation ohne Platzhalter", then "um die Spezifikation ohne Platzhalter zu finalisieren,
  brauche ich diese Angaben … Sobald du diese Punkte beantwortest, aktualisiere ich die
  Spezifikation", kept by "… die Spezifikation entsprechend aktualisiert"); the first promise used
  to stay proposed after the second was closed.

A list handed to the user is resolved only by the English rule (one report rarely covers every item).
A promise marked resolved is hidden from the reviewer, so the rules ask for two pieces of evidence
(a completion word and shared words, or a named file and a write of it) and leave the rest open.
A promise made before a session's `new_from_line` was reported on an earlier night; it is reported
again only when new lines show it done. Subagent files that replay their parent's messages are read
once (the same text said by the same role in an earlier session of the batch is skipped).
"""

from __future__ import annotations

import datetime as dt
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pipeline.consolidator.contract import MAX_QUOTE_CHARS, MIN_QUOTE_CHARS, is_question
from pipeline.consolidator.rules import promise_phrases as pp
from pipeline.consolidator.rules.statements import tidy_statement

__all__ = [
    "CommitmentFinding",
    "Message",
    "commitment_entry",
    "find_commitments",
    "relayed",
    "sentences",
    "spoken_parts",
    "tidy_statement",
]


@dataclass(frozen=True)
class Message:
    """What the user or the agent said on one line (text blocks only, no tool output)."""

    session_id: str
    line_no: int
    role: str
    text: str
    at: dt.datetime | None = None  # when it was said; orders messages across sessions
    is_prompt: bool | None = None  # what the user typed (None: unknown)


# -- what was said, and by whom ---------------------------------------------------------------------
_TAG_BLOCK = re.compile(r"<([A-Za-z][\w-]*)(?:\s[^>]*)?>.*?</\1>", re.DOTALL)
_IDE_HEADER = re.compile(r"\A\s*# Context from my IDE setup:.*?^## My request for [^\n]*:\s*\n", re.DOTALL | re.MULTILINE)
_SUMMARY = re.compile(
    r"\A\s*(?:This session is being continued from a previous conversation|Summary of the conversation so far|"
    r"Here is a summary of the conversation|<summary>)",
    re.IGNORECASE,
)
_AI = r"(?:claude(?: code)?|codex|gemini(?: cli)?|chatgpt|gpt[\w.-]*|copilot|cursor|grok|kimi|qwen|deepseek|llama|mistral|aider|devin|coderabbit|qodo|assistant|agent)"
_RELAY = re.compile(
    rf"\A\s*(?:(?:handshake|handoff|report|message|reply|response|note|from)\s*(?:from|to)?\s*:?\s*{_AI}\b"
    rf"|{_AI}\s*(?:says|said|wrote|replied)?\s*:|[A-Z]:\s)",
    re.IGNORECASE,
)
_SIGNED = re.compile(rf"(?:^|\s)[-—–]\s?{_AI}\s*$", re.IGNORECASE)


def spoken_parts(text: str) -> list[str]:
    """The parts of a message a person said, each a substring of `text` (empty for injected text)."""
    if not text or _SUMMARY.match(text):
        return []
    stripped = text.lstrip()
    if stripped.startswith("<") and ">" in stripped[:80] and _TAG_BLOCK.sub("", stripped).strip() == "":
        return []
    header = _IDE_HEADER.match(text)
    start = header.end() if header else 0
    parts: list[str] = []
    pos = start
    for block in _TAG_BLOCK.finditer(text, start):
        if block.start() > pos:
            parts.append(text[pos : block.start()])
        pos = block.end()
    parts.append(text[pos:])
    return [p for p in parts if p.strip()]


# Where a prompt starts quoting a message someone else wrote (an email pasted to answer it): a mail
# header line, "On … wrote:", a mail client's date line, a forwarded-message rule.
_PASTED = re.compile(
    r"^\s*(?:(?:From|Sent|Date|To|Subject|Cc|보낸 사람|받는 사람|보낸 날짜|发件人|收件人|发送时间|差出人|宛先|送信日時|"
    r"Von|Gesendet|Envoyé|Enviado)\s*:"
    r"|On .{5,120} wrote:\s*$"
    r"|\d{1,2}월 \d{1,2}일 \([월화수목금토일]\) (?:오전|오후) \d{1,2}:\d{2}"
    r"|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? [A-Z][a-z]{2,8} \d{1,2},? (?:\d{4},? )?(?:at )?\d{1,2}:\d{2}"
    r"|\d{4}年\d{1,2}月\d{1,2}日.{0,20}\d{1,2}:\d{2}"
    r"|-{3,}\s*(?:Original Message|Forwarded message|원본 메시지|전달된 메시지|原始邮件|転送されたメッセージ)\s*-{3,})",
    re.MULTILINE | re.IGNORECASE,
)


def voices(part: str, speaker: str) -> list[tuple[str, str]]:
    """The part as (text, speaker) pieces: a user's words, then what they pasted from someone else
    (`_PASTED`), which speaks for that other person."""
    if speaker != "user":
        return [(part, speaker)]
    pasted = _PASTED.search(part)
    if pasted is None:
        return [(part, speaker)]
    return [(part[: pasted.start()], speaker), (part[pasted.start():], "other")]


def relayed(text: str) -> bool:
    """A user prompt that carries another agent's words (see the module docstring)."""
    parts = spoken_parts(text)
    if not parts:
        return False
    body = parts[0].strip()
    return bool(_RELAY.match(body) or _SIGNED.search(body))


# -- sentences --------------------------------------------------------------------------------------
# A sentence ends at . ! ? and a space, at 。！？, at ? or ! right before a CJK character (no space is
# written there), or at "; ".
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|(?<=[?!])(?=[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af])|;\s+")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


_FENCE = re.compile(r"^\s*(?:```|~~~)")


def prose_sentences(text: str) -> list[str]:
    """`sentences` of the text outside fenced code blocks (a block is quoted, not said)."""
    out: list[str] = []
    inside = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            out.extend(sentences(line))
    return out


def sentences(text: str) -> list[str]:
    """Sentences (and semicolon clauses) of a message, each a substring of `text`."""
    out: list[str] = []
    for line in text.split("\n"):
        for part in _SENTENCE_END.split(line):
            part = part.strip()
            if part:
                out.append(part)
    return out


# -- English retelling and resolution (unchanged from the English-only rules) --------------------------
_EN_FIRST_PERSON = re.compile(
    r"\b(?P<who>I['’]ll|I will|I am going to|I['’]m going to|[Ww]e['’]ll|[Ww]e will|"
    r"[Ww]e are going to|[Ww]e['’]re going to|[Ll]et me)\s+(?P<rest>\S.*)$"
)
_CONDITIONAL = re.compile(
    r"\b(?:if|unless|would|could|might|maybe|perhaps|probably|in case|suppose|supposing|whether)\b", re.IGNORECASE
)
_LATER = re.compile(r"\b(?:later|tomorrow|tonight|next (?:week|month|sprint|time|session))\b|稍后|稍後|明天|下次|後で|明日|나중에|내일",
                    re.IGNORECASE)
_ISO_DAY = re.compile(r"(?<!\d)(\d{4}-\d{2}-\d{2})(?!\d)")
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
    speaker: str | None = None  # "agent", "user" or "other"; by default from the role
    why: str = "english"  # which rule: english, deferral, handoff, sequencing, user-list
    items: tuple[str, ...] = ()  # for a user list: its items
    sentence: str = ""  # the whole sentence the promise was read from (the quote may be cut)
    resolved_by: str | None = None  # which rule saw it done: english, report, edit, run, answered, taken up

    @property
    def actor(self) -> str:
        if self.speaker:
            return self.speaker
        return "agent" if self.role == "assistant" else "user"


def _due_hint(sentence: str) -> str | None:
    for day in _ISO_DAY.findall(sentence):
        try:
            dt.date.fromisoformat(day)
        except ValueError:
            continue
        return day
    return None


def _clean_quote(text: str) -> str:
    return _BULLET.sub("", text).strip()[:MAX_QUOTE_CHARS].rstrip()


# The user takes a part of the work to do outside the session, and says so.
_OWN_PART = re.compile(
    r"\b(?:myself|ourselves|on my (?:end|side)|on our (?:end|side)|and (?:tell|let) you know|get back to you|"
    r"report back)\b",
    re.IGNORECASE,
)
# An aside in parentheses neither makes nor unmakes the promise around it.
_ASIDE = re.compile(r"\s*\([^()]*\)")


def _without_asides(sentence: str) -> str:
    return _ASIDE.sub("", sentence)


def _english(sentence: str, message: Message, speaker: str) -> CommitmentFinding | None:
    """The English rule: a first-person future, deferred for an agent (see the module docstring)."""
    match = _EN_FIRST_PERSON.search(sentence)
    if match is None:
        return None
    who, rest = match.group("who"), match.group("rest")
    let_me = who.lower() == "let me"
    plain = _without_asides(sentence)
    if re.match(r"^(?:not|never)\b", rest, re.IGNORECASE) or pp.is_requirement(plain) or pp.is_offer(plain):
        return None
    if _CONDITIONAL.search(plain) or pp.immediate(rest):
        return None
    if let_me and not _LATER.search(rest):
        return None  # "let me look at X" is the next step, not a promise
    if not pp.deferral(rest) and not (speaker == "user" and _OWN_PART.search(rest)):
        # the agent narrating what it does next; the user announcing what they are about to try,
        # stating a plan or delegating: neither defers work past the session (module docstring)
        return None
    verbs = [w for w in _WORD.findall(rest) if w.lower() not in _FILLER]
    if not verbs:
        return None
    due = _due_hint(sentence)
    confidence = 0.8 if who[0] == "I" else 0.6
    if let_me:
        confidence = 0.55
    if due:
        confidence += 0.05
    return CommitmentFinding(
        session_id=message.session_id, line_no=message.line_no, role=message.role,
        quote=sentence[match.start():][:MAX_QUOTE_CHARS].rstrip(), verb=verbs[0].lower(), rest=rest,
        confidence=round(min(confidence, 0.9), 2), due_hint=due, speaker=speaker, why="english", sentence=sentence,
    )


@dataclass(frozen=True)
class _Turn:
    """Where a message sits in its turn."""

    tools_after: bool  # a tool call follows it before the next user message
    last: bool  # no later message of the same speaker before the next user message


def _promise(sentence: str, previous: str | None, message: Message, speaker: str, turn: _Turn) -> CommitmentFinding | None:
    """The multilingual rules for one sentence (see the module docstring)."""
    if is_question(sentence) or pp.negated(sentence) or pp.is_requirement(sentence):
        return None
    if sentence.rstrip(" *_").endswith((":", "：")) and not _LATER.search(sentence):
        return None  # it introduces what follows at once ("Let me check when this pass runs:"): narration
    english = _english(sentence, message, speaker)
    if english is not None:
        return english
    future = pp.first_person_future(sentence)
    hand = pp.handoff(sentence)
    if future is None and not hand:
        return None
    if pp.is_offer(_without_asides(sentence)) or (not hand and pp.hypothetical(sentence)):
        return None
    # Only the agent runs tools: a user's (or a relayed agent's) message always ends its part.
    ends_turn = speaker != "agent" or not turn.tools_after
    why = ""
    if future is not None and not pp.immediate(sentence[future.start():]) and (
            pp.deferral(sentence[future.start():])
            # "once X is finished, I'll …" while the turn goes on working is the plan being carried out
            or (ends_turn and pp.after_done(sentence[:future.start()]))):
        why = "deferral"
    elif hand and ends_turn:
        why = "handoff"
    elif (
        future is not None and speaker != "user" and ends_turn and turn.last and pp.sequencing(sentence)
        and previous is not None and (is_question(previous) or pp.requests_action(previous))
        and not pp.immediate(sentence)
    ):
        why = "sequencing"
    if not why:
        return None
    quote = _clean_quote(sentence)
    if len(quote) < MIN_QUOTE_CHARS:
        return None
    confidence = {"deferral": 0.75, "handoff": 0.7, "sequencing": 0.65}[why]
    return CommitmentFinding(
        session_id=message.session_id, line_no=message.line_no, role=message.role, quote=quote,
        verb="", rest=quote, confidence=confidence, due_hint=_due_hint(sentence), speaker=speaker, why=why,
        sentence=sentence,
    )


# A heading that hands work to the user, then a list (at the end of a turn).
_FOR_USER = re.compile(
    r"^\s*(?:#+\s*|\*\*|__)?\s*(?:"
    r"what\s+(?:you|[A-Z][\w-]*)\s+(?:need|needs|have|has)\s+to\s+do|next\s+steps?\s+(?:for|on)\s+(?:you|your side)|"
    r"your\s+next\s+steps|(?:action\s+items|to-?dos?)\s+for\s+you|for\s+you\s+to\s+do|what(?:'s| is)\s+left\s+for\s+you|"
    r"on\s+your\s+side|you(?:['’]ll| will)?\s+need\s+to(?:\s+do)?|manual\s+steps(?:\s+for\s+you)?|"
    r"需要你|你需要|请你|請你|您需要|あなたが(?:行う|やる)こと|お願いしたいこと|직접\s*하실\s*일|해야\s*할\s*일|"
    r"was\s+du\s+(?:noch\s+)?tun\s+musst|was\s+sie\s+(?:noch\s+)?tun\s+müssen|deine\s+nächsten\s+schritte|"
    r"ce\s+que\s+tu\s+dois\s+faire|à\s+faire\s+de\s+ton\s+côté|de\s+ton\s+côté|lo\s+que\s+(?:tienes|necesitas)\s+que\s+hacer|"
    r"что\s+(?:нужно|надо)\s+сделать\s+(?:вам|тебе)|вам\s+нужно|тебе\s+нужно"
    r")\b[^\n]{0,40}?:?\s*(?:\*\*|__)?\s*:?\s*$",
    re.IGNORECASE,
)


def _user_list(message: Message, part: str) -> CommitmentFinding | None:
    lines = part.split("\n")
    for i, line in enumerate(lines):
        if not _FOR_USER.match(line):
            continue
        items: list[str] = []
        for nxt in lines[i + 1 :]:
            if not nxt.strip():
                if items:
                    break
                continue
            if not _BULLET.match(nxt):
                break
            items.append(_clean_quote(nxt))
        items = [it for it in items if len(it) >= MIN_QUOTE_CHARS]
        if items:
            return CommitmentFinding(
                session_id=message.session_id, line_no=message.line_no, role=message.role, quote=items[0],
                verb="", rest="; ".join(items), confidence=0.7, due_hint=None, speaker="user", why="user-list",
                items=tuple(items),
            )
    return None


@dataclass(frozen=True)
class _Done:
    """Where a promise was seen done: a message's line, or a tool call's line."""

    session_id: str
    line_no: int
    rule: str


def _english_done(finding: CommitmentFinding, later: Sequence[Message]) -> Message | None:
    """The first of the `later` messages that reports this (English) work done with the promise's own
    verb in the past, if any."""
    if finding.why != "english" or not finding.verb:
        return None
    forms = _past_forms(finding.verb)
    wanted = _keywords(finding.rest) - {finding.verb}
    need = 2 if len(wanted) >= 3 else 1
    pattern = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, forms))) + r")\b", re.IGNORECASE)
    for message in later:
        for sentence in sentences(message.text):
            if is_question(sentence) or _EN_FIRST_PERSON.search(sentence):
                continue
            if pattern.search(sentence) and len(wanted & _keywords(sentence)) >= need:
                return message
    return None


# Words of the alphabetic scripts (Latin with its accents, Cyrillic); CJK text has no word breaks and
# contributes only through the Latin names it holds (file names, commands, identifiers).
_TERM_WORD = re.compile(r"[A-Za-z\u00c0-\u024f\u0400-\u04ff][A-Za-z0-9\u00c0-\u024f\u0400-\u04ff]*")
_TERM_STEM = 5  # words that share their first five letters are one term ("aktualisiere", "aktualisiert")
_TERM_STOP = frozenset(
    # English
    "this that these those with from into your yours there here then than when once after before what which "
    "will would could should shall have been being just also only some more most very much such them they their "
    "about over again still even make sure tell know need want please thanks thank okay whenever where "
    "done come back help ready "  # a promise's own condition ("after it's done, come back …") is not its work
    # German
    "dann danach sobald diese dieser dieses einen einer eines eine mich dich dein deine deiner mein meine meiner "
    "wird werde werden habe haben auch noch nicht bitte danke sich sind oder aber wenn weil damit dass einfach "
    "jetzt hier alles "
    # French, Spanish
    "avec pour dans cette sont vous nous mais plus tout tous ensuite quand "
    "para como esto esta este pero todo cuando luego después ahora "
    # Russian
    "чтобы если когда потом затем после этот этого тебе меня только также тоже можно нужно сейчас будет "
    "пришлите".split()
)


def _terms(text: str) -> set[str]:
    """The content words of `text` (four letters or more, not a function word), each cut to its stem."""
    out = set()
    for word in _TERM_WORD.findall(text):
        w = word.lower()
        if len(w) >= 4 and w not in _TERM_STOP:
            out.add(w[:_TERM_STEM])
    return out


def _reports(message: Message) -> list[str]:
    """The sentences of `message` that report work done (see `promise_phrases.reports_done`); one
    that ends its line with a colon takes in the next line, which it introduces ("記錄完成:" and then
    what was recorded)."""
    out: list[str] = []
    for part in spoken_parts(message.text):
        lines = [line for line in part.split("\n") if line.strip()]
        for n, line in enumerate(lines):
            said = sentences(line)
            for i, sentence in enumerate(said):
                if is_question(sentence) or pp.first_person_future(sentence) or not pp.reports_done(sentence):
                    continue
                if i == len(said) - 1 and sentence.rstrip("*_ ").endswith((":", "：")) and n + 1 < len(lines):
                    sentence = f"{sentence} {lines[n + 1].strip()}"
                out.append(sentence)
    return out


# A path: at least one folder separator between names ("specs/001/spec.md", "E:\\a\\b.md", "~/x/y").
_PATH = re.compile(r"(?<![\w:/\\.~-])(?:[A-Za-z]:)?[~.]?[\\/]?(?:[\w.-]+[\\/])+[\w.-]*\w")


def _path_parts(path: str) -> list[str]:
    parts = [p for p in path.replace("\\", "/").lower().split("/") if p and p not in (".", "~")]
    if parts and re.fullmatch(r"[a-z]:", parts[0]):
        parts = parts[1:]
    return parts


def named_paths(text: str) -> list[list[str]]:
    """The paths `text` names (two parts or more: a folder and a name), each split into its parts."""
    out = []
    for match in _PATH.finditer(text):
        if "://" in text[max(0, match.start() - 8) : match.end()]:
            continue  # a URL, not a file
        parts = _path_parts(match.group(0))
        if len(parts) >= 2:
            out.append(parts)
    return out


def same_file(named: Sequence[str], written: str) -> bool:
    """Does the written path end with the named one, or the named one with it, two parts or more
    (a bare name such as `README.md` names no file: every folder has one)?"""
    parts = _path_parts(written)
    short, long_ = (list(named), parts) if len(named) <= len(parts) else (parts, list(named))
    return len(short) >= 2 and long_[len(long_) - len(short) :] == short


def _written(named: Sequence[Sequence[str]], edits: Sequence[tuple[int, str]], after: int, until: int) -> int | None:
    """The first line after `after` (and not after `until`) where a tool call wrote a named file."""
    for line_no, path in edits:
        if after < line_no <= until and any(same_file(n, path) for n in named):
            return line_no
    return None


_CODE_SPAN = re.compile(r"`([^`\n]{4,200})`")
_COMMAND_HEAD = re.compile(r"[A-Za-z][\w+-]*")


def named_commands(text: str) -> list[str]:
    """The command lines `text` names in code spans: a program and at least one more word (`npm install`,
    `git remote add origin <URL>` up to its placeholder); a file name or a single word names none."""
    out = []
    for span in _CODE_SPAN.findall(text):
        words = span.split()
        cut = next((i for i, w in enumerate(words) if w.startswith(("<", "{", "$")) or w in ("...", "…")), len(words))
        words = words[:cut]
        if len(words) >= 2 and _COMMAND_HEAD.fullmatch(words[0]) and not re.search(r"\.[A-Za-z]{1,5}$", words[0]):
            out.append(" ".join(words))
    return out


def _ran(named: Sequence[str], runs: Sequence[tuple[int, str]], after: int) -> int | None:
    """The line of the last of the named commands' first successful runs after `after`, once every one ran."""
    lines = []
    for command in named:
        line = next((n for n, ran in runs if n > after and command in ran), None)
        if line is None:
            return None
        lines.append(line)
    return max(lines) if lines else None


def _promised_verb(sentence: str) -> str | None:
    """The stem of the verb the speaker promised ("fülle ich … aus" → "füll", "I'll write" → "writ"),
    when it is written in an alphabetic script and four letters or more."""
    match = pp.first_person_future(sentence)
    if match is None:
        return None
    before = _TERM_WORD.findall(match.group(0))
    if len(before) >= 2 and before[-1].lower() == "ich":  # German verb-second: "dann fülle ich"
        verb = before[-2]
    else:
        after = [w for w in _TERM_WORD.findall(sentence[match.end():]) if w.lower() not in _FILLER]
        if not after:
            return None
        verb = after[0]
    stem = re.sub(r"(?:en|e|s)$", "", verb.lower())
    return stem if len(stem) >= 4 else None


def _report_done(finding: CommitmentFinding, message: Message, later: Sequence[Message]) -> _Done | None:
    """The first later report, by the promise's own side, that shares two terms with the promise, or
    one term and the promised verb ("fülle ich … konkret aus" → "… konkret ausgefüllt")."""
    wanted = _terms(finding.sentence or finding.rest)
    verb = _promised_verb(finding.sentence) if finding.sentence else None
    for reply in later:
        if reply.role != message.role:
            continue
        for report in _reports(reply):
            shared = wanted & _terms(report)
            if len(shared) >= 2:
                return _Done(reply.session_id, reply.line_no, "report")
            if verb and any(verb in w.lower() for w in _TERM_WORD.findall(report)) and len(shared - {verb[:_TERM_STEM]}) == 1:
                return _Done(reply.session_id, reply.line_no, "report")
    return None


def _taken_up(findings: Sequence[CommitmentFinding], said: Sequence[Message]) -> list[CommitmentFinding]:
    """A promise taken up again: a later message of the same side comes back to the same work (it
    shares two terms with the promise) and promises it anew; when that new promise is kept, so is
    the first (module docstring)."""
    text = {(m.session_id, m.line_no): m.text for m in said}
    out = list(findings)
    for i, first in enumerate(out):
        if first.resolved_at is not None or first.why == "user-list":
            continue
        wanted = _terms(first.sentence or first.rest)
        for later in out[i + 1:]:
            if (later.session_id == first.session_id and later.actor == first.actor and later.line_no > first.line_no
                    and later.resolved_at is not None and later.resolved_in is None
                    and len(wanted & _terms(text.get((later.session_id, later.line_no), ""))) >= 2):
                out[i] = replace(first, resolved_at=later.resolved_at, resolved_by="taken up")
                break
    return out


def _resolution(
    finding: CommitmentFinding, message: Message, later: Sequence[Message], edits: Sequence[tuple[int, str]],
    runs: Sequence[tuple[int, str]] = (),
) -> _Done | None:
    """Where the promise made in `message` was seen done: in the `later` messages (those of its own
    session, or of the project's later sessions, in order) or in `edits`, its session's file writes as
    (call line, path). The rules are in the module docstring; the earliest evidence wins."""
    found: list[_Done] = []
    english = _english_done(finding, later)
    if english is not None:
        found.append(_Done(english.session_id, english.line_no, "english"))
    if finding.why != "user-list":
        named = named_paths(finding.sentence) if finding.actor == "agent" else []
        line = _written(named, edits, message.line_no, 1 << 62) if named else None
        if line is not None:
            found.append(_Done(message.session_id, line, "edit"))
        commands = named_commands(finding.sentence) if finding.actor == "agent" and finding.sentence else []
        line = _ran(commands, runs, message.line_no) if commands else None
        if line is not None:
            found.append(_Done(message.session_id, line, "run"))
        report = _report_done(finding, message, later)
        if report is not None:
            found.append(report)
    if not found:
        return None
    rank = {sid: i for i, sid in enumerate(dict.fromkeys(m.session_id for m in later))}
    return min(found, key=lambda d: (rank.get(d.session_id, -1), d.line_no))


# What a user's message holds when the user did not write it to the agent: a command they ran
# themselves and its output (`<bash-input>`, `<local-command-stdout>`), a harness notice, an image.
_NOT_A_REPLY = re.compile(
    r"\A\s*(?:<(?:bash-|local-command|command-|system-reminder|turn_aborted|task-notification|user-prompt-submit-hook)"
    r"|(?:\[Image[^\]]*\]\s*)+\Z)"
)
_URL = re.compile(r"https?://\S")
_ASKS_FOR_LINK = re.compile(r"\b(?:links?|urls?|enlaces?|liens?)\b|链接|鏈接|リンク|링크|ссылк", re.IGNORECASE)
# Longer than this, a reply is about more than the go-ahead (a new request that says "go ahead").
_SHORT_REPLY = 60


def _answered(finding: CommitmentFinding, message: Message, later: Sequence[Message]) -> _Done | None:
    """An agent's hand-off (or a promise awaiting the user's go-ahead) that ended its turn waiting, kept
    when the user's next message gives what it waited for and the agent goes on: a short go-ahead or
    report that the user's part is done ("figlet is done", "Implement the plan.", "行，那你试一下1"), the
    link it asked for, or, when it waited for the user's answer (a quiz), any reply that asks nothing. Where the agent
    answers is where the promise counts as kept. A longer reply, a question or a reply with neither is
    no answer: the user went on to something else and the promise stays open."""
    sid = message.session_id
    reply = next((m for m in later if m.session_id == sid and m.role == "user" and m.is_prompt is not False
                  and not _NOT_A_REPLY.match(m.text) and not relayed(m.text)), None)
    if reply is None:
        return None
    acted = next((m for m in later if m.session_id == sid and m.role == "assistant" and m.line_no > reply.line_no), None)
    if acted is None or _waits_again(acted.text):
        return None
    text = " ".join(reply.text.split())
    sentence = finding.sentence or finding.quote
    asks = is_question(text) or text.rstrip().endswith("？")
    if asks or not text:
        return None
    if _ASKS_FOR_LINK.search(sentence) and _URL.search(text):
        return _Done(sid, acted.line_no, "answered")
    if pp.awaits_answer(sentence) and not pp.turns_away(text):
        return _Done(sid, acted.line_no, "answered")  # a quiz's answer: whatever the user says is it
    if len(text) <= _SHORT_REPLY and pp.go_ahead(text):
        return _Done(sid, acted.line_no, "answered")
    return None


def _waits_again(text: str) -> bool:
    """The agent's answer asks again for what it waits on (a hand-off, or a request that ends in a
    question): the go-ahead did not give it what it needed ("ja" … "Sobald du diese Punkte
    beantwortest, aktualisiere ich …")."""
    said = [s for part in spoken_parts(text) for s in prose_sentences(part)]
    return any(pp.handoff(s) for s in said) or bool(said and (is_question(said[-1]) and pp.requests_action(said[-1])))


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


def _turns(said: Sequence[Message], calls: Sequence[int], asks: Sequence[int] = ()) -> dict[int, _Turn]:
    """For each message of one session: does a tool call follow it in its turn, is it the turn's last?
    A call that asks the user and waits (`asks`) ends the turn as a user message does."""
    out: dict[int, _Turn] = {}
    user_lines = sorted([m.line_no for m in said if m.role == "user"] + list(asks))
    for i, m in enumerate(said):
        nxt_user = next((u for u in user_lines if u > m.line_no), 1 << 62)
        tools_after = bisect_right(calls, m.line_no) < len(calls) and calls[bisect_right(calls, m.line_no)] < nxt_user
        last = not any(o.role == m.role and m.line_no < o.line_no < nxt_user for o in said[i + 1 :])
        out[m.line_no] = _Turn(tools_after=tools_after, last=last)
    return out


def find_commitments(
    messages: Sequence[Message],
    new_from_line: Mapping[str, int] | None = None,
    slugs: Mapping[str, str | None] | None = None,
    calls: Mapping[str, Sequence[int]] | None = None,
    edits: Mapping[str, Sequence[tuple[int, str]]] | None = None,
    asks: Mapping[str, Sequence[int]] | None = None,
    runs: Mapping[str, Sequence[tuple[int, str]]] | None = None,
) -> list[CommitmentFinding]:
    """Promises in user and agent text, in transcript order (see the module docstring).

    `calls` gives each session's tool-call line numbers (sorted); without it no turn has tool calls.
    `edits` gives each session's file writes as (tool-call line, path), sorted; without it no promise
    is seen kept by a tool call; `runs` gives each session's successful shell commands as (tool-call line,
    command line with its whitespace runs made single spaces), sorted, for promises that name a command. `asks` gives the lines of calls that put a question to the user and wait
    for the answer: each ends a turn.
    """
    new_from = new_from_line or {}
    by_session: dict[str, list[Message]] = {}
    heard: dict[tuple[str, str], str] = {}
    replayed: set[tuple[str, int]] = set()
    for message in messages:
        if message.role not in ("user", "assistant") or not message.text:
            continue
        key = (message.role, message.text)
        if len(message.text) >= 40 and heard.get(key, message.session_id) != message.session_id:
            replayed.add((message.session_id, message.line_no))  # a subagent replaying its parent's conversation
        heard.setdefault(key, message.session_id)
        by_session.setdefault(message.session_id, []).append(message)
    for said in by_session.values():
        said.sort(key=lambda m: m.line_no)
    found: list[CommitmentFinding] = []
    seen_promises: set[tuple[str, str, str]] = set()
    for sid, said in by_session.items():
        turns = _turns(said, sorted((calls or {}).get(sid, ())), sorted((asks or {}).get(sid, ())))
        for i, message in enumerate(said):
            if (sid, message.line_no) in replayed:
                continue  # still a turn boundary above, but its words were read where they were first said
            speaker = "agent" if message.role == "assistant" else ("other" if relayed(message.text) else "user")
            turn = turns[message.line_no]
            candidates: list[CommitmentFinding] = []
            for part in spoken_parts(message.text):
                for piece, who in voices(part, speaker):
                    previous: str | None = None
                    for sentence in prose_sentences(piece):
                        finding = _promise(sentence, previous, message, who, turn)
                        if finding is not None:
                            candidates.append(finding)
                        previous = sentence
                if speaker == "agent" and not turn.tools_after and turn.last:
                    listed = _user_list(message, part)
                    if listed is not None:
                        candidates.append(listed)
            written = sorted((edits or {}).get(sid, ()))
            for finding in candidates:
                said_before = (finding.session_id, finding.actor, finding.quote)
                if said_before in seen_promises:
                    continue  # the same promise said again in its session (a prompt sent twice)
                seen_promises.add(said_before)
                done = _resolution(finding, message, said[i + 1 :], written, sorted((runs or {}).get(sid, ())))
                waits = finding.why in ("handoff", "sequencing") or pp.awaits_decision(finding.sentence or finding.quote)
                if done is None and finding.actor == "agent" and waits and turn.last and not turn.tools_after:
                    done = _answered(finding, message, said[i + 1 :])
                if done is None and slugs:
                    done = _resolution(finding, message, _later_in_project(message, by_session, slugs), ())
                fresh_news = done is not None and done.line_no >= new_from.get(done.session_id, 1)
                if finding.line_no < new_from.get(sid, 1) and not fresh_news:
                    continue
                found.append(replace(
                    finding,
                    resolved_at=done.line_no if done else None,
                    resolved_in=done.session_id if done and done.session_id != sid else None,
                    resolved_by=done.rule if done else None,
                ))
    return _taken_up(found, [m for said in by_session.values() for m in said])


_SECOND_PERSON = re.compile(r"\byou\b")
_THIRD_PERSON = (
    (re.compile(r"\bmyself\b"), "themselves"),
    (re.compile(r"\bourselves\b"), "themselves"),
    (re.compile(r"\bmy\b"), "their"),
    (re.compile(r"\bour\b"), "their"),
    (re.compile(r"\bwe\b"), "they"),
    (re.compile(r"\bus\b"), "them"),
)
_WHO = {"agent": "The agent", "user": "The user", "other": "Another agent"}


def _clip(text: str, limit: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1].rstrip() + "…"


def _statement(finding: CommitmentFinding) -> str:
    """The commitment retold in the third person ("I'll fix X" → "The agent will fix X.")."""
    who = _WHO[finding.actor]
    if finding.why == "user-list":
        return _clip(f"The user is to: {'; '.join(finding.items)}.", 400)
    if finding.why != "english":
        waits = {"handoff": " once the other party does their part", "sequencing": " once the other party answers"}
        return _clip(f"{who} said they would do this{waits.get(finding.why, ' later')}: {finding.quote}", 400)
    rest = finding.rest
    for pattern, replacement in _THIRD_PERSON:
        rest = pattern.sub(replacement, rest)
    rest = _SECOND_PERSON.sub("the user" if finding.actor == "agent" else "the agent", rest)
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
