"""Promises left outstanding, in eight languages (`commitments` and `promise_phrases`).

Every sentence here is written for the test, after the grammar patterns the rules follow; none is
taken from a transcript.
"""

from __future__ import annotations

import pytest

from pipeline.consolidator.rules import promise_phrases as pp
from pipeline.consolidator.rules.commitments import (
    Message,
    commitment_entry,
    find_commitments,
    relayed,
    spoken_parts,
)


def turn(agent: str, *, prompt: str = "Please look into it.", tools_after: bool = False, role: str = "assistant") -> list:
    """A prompt (line 1), the message (line 3), and a tool call at line 4 when `tools_after`."""
    said = [Message("s1", 1, "user", prompt, is_prompt=True), Message("s1", 3, role, agent)]
    return [said, {"s1": [4] if tools_after else []}]


def found(agent: str, **kw: object) -> list[tuple[str, str]]:
    said, calls = turn(agent, **kw)  # type: ignore[arg-type]
    return [(f.actor, f.why) for f in find_commitments(said, calls=calls)]


@pytest.mark.parametrize(
    "text",
    [
        "Send me the export file and I'll load it into the staging database.",
        "Once you have run the migration, paste the output here and I'll verify the counts.",
        "Gib mir die Zugangsdaten, dann richte ich den Server ein. Sobald du die Liste schickst, ergänze ich die Tabelle.",
        "Dès que tu m'envoies le logo, je mettrai à jour la page d'accueil.",
        "Cuando me envíes los datos, prepararé el informe.",
        "Пришли мне файл конфигурации, я проверю настройки.",
        "你把日志发给我,我就能定位问题。",
        "你把日志发给我，我就修复这个问题，这样我们就可以发布了。",  # a firm promise before the reason
        "ログを送っていただければ、原因を調べます。",
        "설정 파일을 보내주시면 바로 확인할게요.",
    ],
)
def test_a_hand_off_at_the_end_of_a_turn_is_a_promise(text: str) -> None:
    assert found(text) and all(who == "agent" for who, _ in found(text))
    # the same words followed by tool calls in the turn: the agent is doing it, not promising it
    assert found(text, tools_after=True) == []


@pytest.mark.parametrize(
    "text",
    [
        "I'll clean up the feature flag in a follow-up PR once the rollout is done.",
        "Je corrigerai le script plus tard.",
        "Das Logging entferne ich später, wenn der Fehler gefunden ist.",
        "Потом допишу тесты для парсера.",
        "这个接口我稍后再补上文档。",
    ],
)
def test_a_deferral_is_a_promise_even_mid_turn(text: str) -> None:
    assert [why for _, why in found(text, tools_after=True)] in (["deferral"], ["english"])


def test_sequencing_after_a_request_at_the_end_of_a_turn() -> None:
    ask = "Kannst du mir die Fristen nennen? Danach trage ich sie in die Spezifikation ein."
    assert found(ask) == [("agent", "sequencing")]
    assert found("Die Tests laufen durch. Danach trage ich sie ein.") == []  # nothing was asked
    assert found(ask, tools_after=True) == []


@pytest.mark.parametrize(
    "text",
    [
        "I'll update the workflow to use repository secrets.",  # narration, plain announcement
        "If you want, I can also add a dark mode.",  # an offer
        "Want me to tighten these thresholds?",  # a question
        "Tell me which other formats you'd like and I'll add them.",  # an open offer of service
        "Let me know the scope and I'll proceed.",  # nothing specific promised
        "If you approve this diff, I'll commit it.",  # a go-ahead, not a hand-off
        "Si tu valides, je lance la génération.",
        "如果你愿意，我可以继续把图标也换掉。",
        "请告诉我你的部署环境，这样我就能给出最合适的配置了！",  # what the speaker would be able to do
        "把错误日志贴给我，这样我就能定位问题。",  # as "send me the log so I can locate it" is an offer
        "Если хочешь, я добавлю ещё пример.",
        "よろしければ、続けて修正します。",
        "원하시면 다음 버전도 만들어 드릴게요.",
        "Wenn du möchtest, passe ich die Farben an.",
        "Si quieres, revisaré el resto mañana.",
        "Si tu n'as pas de préférence, je recommande la première option.",
        "I'll now run the linter.",
        "我先看一下目录结构。",
        "Сейчас проверю логи.",
        "We will also need an exporter for the second format.",  # a requirement
        "I won't touch the billing module.",
    ],
)
def test_what_is_not_a_promise(text: str) -> None:
    assert found(text) == []


def test_a_list_of_steps_handed_to_the_user() -> None:
    text = "Everything is in place.\n\n## What Dana needs to do\n\n1. Create the API token\n2. Add it to the CI secrets\n\nThat's all."
    said, calls = turn(text)
    [finding] = find_commitments(said, calls=calls)
    assert finding.actor == "user" and finding.quote == "Create the API token"
    entry = commitment_entry(finding)
    assert entry["actor"] == "user" and "Add it to the CI secrets" in entry["statement"]
    said, calls = turn(text, tools_after=True)
    assert find_commitments(said, calls=calls) == []


def test_user_promises() -> None:
    said = [Message("s1", 1, "user", "I'll rotate the staging keys myself tomorrow.", is_prompt=True)]
    assert [(f.actor, f.quote) for f in find_commitments(said)] == [("user", "I'll rotate the staging keys myself tomorrow.")]
    said = [Message("s1", 1, "user", "If it breaks again I'll rewrite it.", is_prompt=True)]
    assert find_commitments(said) == []


def test_relayed_speech_is_another_party_s() -> None:
    for text in ("CODEX SAYS: once the merge lands I'll tag the release later.",
                 "HANDSHAKE: Claude Code — send me the ticket and I'll draft the fix.",
                 "Send me the ticket and I'll draft the fix. -Claude"):
        assert relayed(text), text
        said = [Message("s1", 1, "user", text, is_prompt=True)]
        assert {f.actor for f in find_commitments(said)} == {"other"}, text
    assert not relayed("C:\\Users\\me\\notes.txt is the file I meant")


def test_injected_text_is_skipped() -> None:
    text = "<system-reminder>I'll do it later.</system-reminder>"
    assert spoken_parts(text) == []
    ide = "# Context from my IDE setup:\n\n## Open tabs:\n- a.md\n\n## My request for Codex:\nI'll send the logs later.\n"
    assert [p.strip() for p in spoken_parts(ide)] == ["I'll send the logs later."]
    summary = "This session is being continued from a previous conversation. I'll finish the docs later."
    assert find_commitments([Message("s1", 1, "user", summary)]) == []


def test_a_replayed_conversation_is_read_once() -> None:
    text = "Send me the export file and I'll load it into the staging database tonight."
    said = [Message("p", 3, "assistant", text), Message("agent-x", 3, "assistant", text)]
    assert [f.session_id for f in find_commitments(said)] == ["p"]


def test_phrase_families() -> None:
    assert pp.first_person_future("Danach entferne ich die Marker.") is not None
    assert pp.first_person_future("je vais relancer le build") is not None
    assert pp.first_person_future("The build is green.") is None
    assert pp.is_requirement("We'll need a second exporter") and not pp.is_requirement("We'll ship it later")
    assert pp.deferral("after this lands") and pp.deferral("once staging runs 4.2") and not pp.deferral("after reading the file")
    assert pp.immediate("right now") and not pp.immediate("tomorrow")


def test_sentences_end_before_cjk_text_without_a_space() -> None:
    from pipeline.consolidator.rules.commitments import sentences

    assert sentences("要不要我先查一下?你给我路径我就补上。好的。") == ["要不要我先查一下?", "你给我路径我就补上。", "好的。"]


# -- promises come only from conversational text (the false promises of the unseen real sessions) ------
@pytest.mark.parametrize(
    "prompt",
    [
        "I am going to run a command with a lot of output.",  # what the user is about to try, right now
        "I'm going to wipe the test database and start from scratch",
        "I'll let you pick the library here.",  # a delegation
        "I'll be mostly hands-off for this project: keep the plan in PLAN.md.",  # a /plan prompt's own plan
        "We'll use Vite, React and a Go backend.",  # a statement of the stack
    ],
)
def test_a_prompt_s_own_announcements_plans_and_delegations_are_not_promises(prompt: str) -> None:
    assert find_commitments([Message("s1", 1, "user", prompt, is_prompt=True)]) == []


@pytest.mark.parametrize(
    "prompt",
    [
        "I'll restart the database container myself and tell you when it's up.",  # work taken off the agent
        "I will finish the migration notes tonight.",
        "Ich werde die Screenshots morgen machen.",
    ],
)
def test_a_user_s_promise_defers_their_own_work_past_the_session(prompt: str) -> None:
    assert [f.actor for f in find_commitments([Message("s1", 1, "user", prompt, is_prompt=True)])] == ["user"]


@pytest.mark.parametrize(
    "text",
    [
        "If it still looks plain, tell me which page you opened and I'll trace it.",
        "If you don't see the Export button, tell me which screen you are on and I'll fix the layout.",
        "If another error appears after the reload, send me the stack and I'll close that out too.",
        "Falls es immer noch hängt, schick mir das Log, dann schaue ich es mir an.",
    ],
)
def test_a_contingency_on_work_just_done_is_an_offer(text: str) -> None:
    assert found(text) == []
    assert pp.is_offer(text)


@pytest.mark.parametrize(
    "text",
    [
        "After the flash finishes, come back here and I'll help you format the data partition.",
        "Then paste the hash here and I'll update the config and clean up the history.",
        "When you're ready, switch me out of plan mode and I'll start with the schema.",
        "Let me know once the scaffold exists (or if you want me to generate it) and I'll pick up from there.",
    ],
)
def test_an_imperative_to_the_other_party_then_the_speaker_s_part_is_a_hand_off(text: str) -> None:
    assert found(text) == [("agent", "handoff")]


def test_a_fenced_block_is_quoted_not_said() -> None:
    text = "Run this:\n```\n# I'll clean the cache later\nrm -rf .cache\n```\nThat is all."
    assert found(text) == []
    said = [Message("s1", 1, "user", "```\nwe'll migrate the tables tomorrow\n```", is_prompt=True)]
    assert find_commitments(said) == []


def test_the_same_promise_said_twice_in_a_session_is_one() -> None:
    prompt = "I'll rotate the staging keys myself tomorrow."
    said = [Message("s1", 1, "user", prompt, is_prompt=True), Message("s1", 5, "user", prompt, is_prompt=True)]
    assert [f.line_no for f in find_commitments(said)] == [1]


# -- promises in the forms the third batch of real transcripts showed (sentences written for the test) --
@pytest.mark.parametrize(
    "text",
    [
        # Japanese: the other party's part, then the speaker's, however long the commands between them,
        # and even when the speaker's own part will check something (確認 is not a go-ahead here)
        "そちらで `sudo systemctl restart docker` と `sudo usermod -aG docker $USER` を通せれば、こちらで再度ビルドして動作確認まで進めます。",
        # Korean: the humble present of a service promised after a request
        "저장소 주소를 알려주시면 `git remote add` 와 첫 푸시까지 설정해 드립니다.",
        # Portuguese
        "Quando você me mandar o arquivo de configuração, vou ajustar o deploy.",
    ],
)
def test_hand_offs_in_the_forms_real_transcripts_use(text: str) -> None:
    assert [who for who, _ in found(text)] == ["agent"]


@pytest.mark.parametrize(
    "text",
    [
        "我下一条就把完整的配置文件发给你。",  # the next message is beyond this turn
        "迁移脚本完成后我会停下来让你检查结果。",  # after something still to come is finished
        "Vou revisar os testes amanhã.",  # Portuguese, tomorrow
        "ok ill fix the flaky test tomorrow",  # informal English: "ill" for "I'll"
    ],
)
def test_deferrals_in_the_forms_real_transcripts_use(text: str) -> None:
    assert found(text) != []


@pytest.mark.parametrize(
    "text",
    [
        "Let me check when this pass runs:",  # a colon: what follows is the work itself
        "我来逐层分析一下这个流程：",
        "再起動したら地図が育ちます。",  # says what will happen, nobody promises anything
        "I was ill yesterday, sorry for the delay.",  # "ill" the adjective
        "Se você quiser, posso adicionar mais exemplos.",  # a Portuguese offer
    ],
)
def test_introductions_forecasts_and_offers_are_not_promises(text: str) -> None:
    assert found(text) == []


def test_a_call_that_asks_the_user_ends_the_turn() -> None:
    said = [Message("s1", 1, "user", "Plan the migration.", is_prompt=True),
            Message("s1", 3, "assistant", "等你处理完当前改动后告诉我，我就开始执行第一阶段。")]
    # the question tool at line 4, then the work at line 6 once the user answered through it
    assert find_commitments(said, calls={"s1": [6]}, asks={"s1": [4]})
    assert find_commitments(said, calls={"s1": [4, 6]}) == []


def test_a_pasted_email_speaks_for_its_writer() -> None:
    prompt = ("Help me answer this email and attach my CV.\n"
              "Dana Kim\nTue, Jun 9, 2026, 1:28 PM\nto me\n\n"
              "Hello, please send your CV in any format. Send it as soon as you can and I'll review it right away.")
    said = [Message("s1", 1, "user", prompt, is_prompt=True)]
    assert [f.actor for f in find_commitments(said)] in ([], ["other"])
    mine = [Message("s1", 1, "user", "I'll send the signed contract tomorrow.", is_prompt=True)]
    assert [f.actor for f in find_commitments(mine)] == ["user"]
