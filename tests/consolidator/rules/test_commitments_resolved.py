"""When a promise was kept (`resolved`): a later write of the file it names, or a later report of the
work done, in any of the eight languages.

Every sentence here is written for the test, after the grammar patterns the rules follow; none is
taken from a transcript.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.consolidator.rules import promise_phrases as pp
from pipeline.consolidator.rules import shell_commands as sh
from pipeline.consolidator.rules.commitments import (
    CommitmentFinding,
    Message,
    find_commitments,
    named_paths,
    same_file,
)

PROMPT = "Please look into it."


def session(promise: str, *later: tuple[str, str], edits: Sequence[tuple[int, str]] = ()) -> list[CommitmentFinding]:
    """A prompt (line 1), the promise ending its turn (line 3), the user's answer (line 5), then each
    (role, text) of `later` on lines 7, 9, …; `edits` are file writes as (line, path)."""
    said = [
        Message("s1", 1, "user", PROMPT, is_prompt=True),
        Message("s1", 3, "assistant", promise),
        Message("s1", 5, "user", "Here it is.", is_prompt=True),
    ]
    said += [Message("s1", 7 + 2 * i, role, text) for i, (role, text) in enumerate(later)]
    calls = sorted({n for n, _ in edits})
    return find_commitments(said, calls={"s1": calls}, edits={"s1": list(edits)})


def only(findings: list[CommitmentFinding]) -> CommitmentFinding:
    """The promise of line 3 (a later message may promise something of its own)."""
    mine = [f for f in findings if f.line_no == 3]
    assert len(mine) == 1, findings
    return mine[0]


# -- a report of the work done ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("promise", "report"),
    [
        ("Send me the invoice template and I'll write the quarterly summary into the finance folder.",
         "Quarterly summary recorded in the finance folder."),
        ("Sobald du die Preise schickst, aktualisiere ich die Preisliste im Handbuch.",
         "Ich habe die Preisliste im Handbuch aktualisiert."),
        ("Dès que tu m'envoies le logo, je mettrai à jour la bannière du portail.",
         "La bannière du portail est mise à jour."),
        ("Cuando me envíes los datos, prepararé el informe mensual de ventas.",
         "Informe mensual de ventas terminado."),
        ("Пришлите мне ссылку на архив, я попробую скачать отчёт.",
         "Архив скачан, отчёт сохранён в папке загрузок."),
        ("你把 nginx 配置发给我,我就更新 deploy 脚本的 upstream 部分。",
         "已更新 deploy 脚本的 upstream 部分。"),
        ("設定ファイルを送っていただければ、migration スクリプトの timeout を直します。",
         "migration スクリプトの timeout を修正しました。"),
        ("설정 파일을 보내주시면 cache 설정의 timeout 값을 고칠게요.",
         "cache 설정의 timeout 값 수정 완료했습니다."),
    ],
)
def test_a_later_report_that_shares_the_work_resolves(promise: str, report: str) -> None:
    finding = only(session(promise, ("assistant", report)))
    assert (finding.resolved_at, finding.resolved_by) == (7, "report")


def test_one_shared_word_is_enough_beside_the_promised_verb() -> None:
    promise = "Magst du mir die Beschreibung geben? Dann fülle ich die Abschnitte konkret aus."
    assert only(session(promise, ("assistant", "Erledigt. Ich habe alles konkret ausgefüllt."))).resolved_by == "report"
    # the same word without the verb is not enough
    assert only(session(promise, ("assistant", "Ich habe die Tabelle konkret ergänzt."))).resolved_at is None


def test_a_report_colon_takes_in_the_line_it_introduces() -> None:
    promise = "你指定路徑,我就把 decision log 補上 design notes。"
    report = "記錄完成:\n\n- 新增 decision log 一節,寫在 design notes 裡。"
    assert only(session(promise, ("assistant", report))).resolved_at == 7


@pytest.mark.parametrize(
    "report",
    [
        "The quarterly summary is not recorded yet; the finance folder is read-only.",  # not done
        "Have you recorded the quarterly summary in the finance folder?",  # a question
        "I'll record the quarterly summary in the finance folder later.",  # still a future
        "Updated the README.",  # done, but something else
        "还没更新 quarterly summary 和 finance folder。",  # not done, in Chinese
    ],
)
def test_what_does_not_resolve(report: str) -> None:
    promise = "Send me the invoice template and I'll write the quarterly summary into the finance folder."
    assert only(session(promise, ("assistant", report))).resolved_at is None


def test_only_the_promising_side_reports_its_own_work() -> None:
    promise = "Send me the invoice template and I'll write the quarterly summary into the finance folder."
    assert only(session(promise, ("user", "Quarterly summary recorded in the finance folder."))).resolved_at is None


def test_one_shared_word_that_is_the_verb_is_not_enough() -> None:
    promise = "你跑完把結果貼給我,過了我就 commit。"
    assert only(session(promise, ("assistant", "已 commit 並 push 到 develop。"))).resolved_at is None


# -- a tool call that writes the named file -----------------------------------------------------------
def test_writing_the_named_file_resolves() -> None:
    promise = r"Sobald du diese Punkte beantwortest, aktualisiere ich die Spezifikation in E:\proj\specs\001-login\spec.md."
    finding = only(session(promise, edits=[(6, "specs/001-login/spec.md")]))
    assert (finding.resolved_at, finding.resolved_by) == (6, "edit")


@pytest.mark.parametrize(
    "written",
    ["docs/README.md", "other/001-login/spec.md", "spec.md"],
)
def test_writing_another_file_does_not(written: str) -> None:
    promise = "Send me the field list and I'll update specs/001-login/spec.md with it."
    assert only(session(promise, edits=[(6, written)])).resolved_at is None


def test_a_bare_file_name_names_no_file() -> None:
    promise = "Send me the field list and I'll update README.md with it."
    assert only(session(promise, edits=[(6, "docs/README.md")])).resolved_at is None


def test_a_write_before_the_promise_does_not_count() -> None:
    said = [
        Message("s1", 1, "user", PROMPT, is_prompt=True),
        Message("s1", 3, "assistant", "Send me the field list and I'll update specs/login/spec.md with it."),
    ]
    found = find_commitments(said, calls={"s1": [2]}, edits={"s1": [(2, "specs/login/spec.md")]})
    assert only(found).resolved_at is None


def test_named_paths_and_matching() -> None:
    assert named_paths(r"see E:\a\b\spec.md and ~/w/x.md, not https://h/x/y or README.md") == [
        ["a", "b", "spec.md"], ["w", "x.md"]]
    assert same_file(["a", "b", "spec.md"], "b/spec.md")
    assert not same_file(["b", "spec.md"], "c/spec.md")


def test_written_files_of_tool_calls() -> None:
    patch = "*** Begin Patch\n*** Update File: a/b.md\n@@\n-x\n+y\n*** Add File: c/d.md\n+z\n*** Delete File: e/f.md\n*** End Patch"
    assert sh.written_files("apply_patch", patch) == ["a/b.md", "c/d.md"]
    assert sh.written_files("shell", {"command": ["apply_patch", patch]}) == ["a/b.md", "c/d.md"]
    assert sh.written_files("Write", {"file_path": "/x/y.md", "content": ""}) == ["/x/y.md"]
    assert sh.written_files("Read", {"file_path": "/x/y.md"}) == []


@given(st.text(alphabet="abcdefghij /\\.-", max_size=40), st.text(alphabet="abcdefghij/.-", max_size=40))
def test_same_file_needs_two_shared_parts(named_text: str, written: str) -> None:
    for named in named_paths(named_text):
        if same_file(named, written):
            tail = [p for p in written.lower().split("/") if p and p not in (".", "~")]
            assert len(tail) >= 2 and len(named) >= 2
            short = min(len(tail), len(named))
            assert tail[-short:] == named[-short:]


@pytest.mark.parametrize(
    ("sentence", "done"),
    [
        ("Done: the index is rebuilt.", True),
        ("Erledigt, die Datei ist gespeichert.", True),
        ("C'est fait, j'ai ajouté la colonne.", True),
        ("Listo, he actualizado el archivo.", True),
        ("Готово, файл обновлён и сохранен.", True),
        ("已完成迁移。", True),
        ("移行が完了しました。", True),
        ("배포 완료했습니다.", True),
        ("The tests have not been updated.", False),
        ("Die Datei ist noch nicht gespeichert.", False),
        ("Ещё не сохранено.", False),
        ("还没完成。", False),
        ("This is already a git repository.", False),
    ],
)
def test_done_reports(sentence: str, done: bool) -> None:
    assert pp.reports_done(sentence) is done


def test_a_promise_taken_up_again_is_kept_with_the_new_one() -> None:
    """The German case of the real sessions: a promise restated when the agent asks for what it waits
    on is kept when the restated one is (before, the first stayed proposed and the second was closed)."""
    said = [
        Message("s1", 1, "user", PROMPT, is_prompt=True),
        Message("s1", 3, "assistant", "Magst du die offenen Punkte nennen? Danach finalize ich die Spezifikation ohne Platzhalter."),
        Message("s1", 5, "user", "ja", is_prompt=True),
        Message("s1", 7, "assistant", "Um die Spezifikation ohne Platzhalter zu finalisieren, brauche ich Angaben. "
                "Sobald du diese Punkte beantwortest, aktualisiere ich die Spezifikation und die Tariftabelle."),
        Message("s1", 9, "user", "Freiperiode 10 Minuten, Abrechnung pro Stunde.", is_prompt=True),
        Message("s1", 11, "assistant", "Ich habe die Tarifangaben eingearbeitet und die Spezifikation mit der Tariftabelle aktualisiert."),
    ]
    found = {f.line_no: f for f in find_commitments(said)}
    assert (found[7].resolved_at, found[7].resolved_by) == (11, "report")
    assert (found[3].resolved_at, found[3].resolved_by) == (11, "taken up")
    # a later promise about other work does not carry the first
    said[3] = Message("s1", 7, "assistant", "Sobald du die Zugangsdaten schickst, richte ich den Server und die Tariftabelle ein.")
    said[5] = Message("s1", 11, "assistant", "Ich habe den Server mit der Tariftabelle erstellt.")
    found = {f.line_no: f for f in find_commitments(said)}
    assert found[7].resolved_at == 11 and found[3].resolved_at is None


def _with_runs(promise: str, runs: Sequence[tuple[int, str]]) -> list[CommitmentFinding]:
    said = [
        Message("s1", 1, "user", PROMPT, is_prompt=True),
        Message("s1", 3, "assistant", promise),
        Message("s1", 5, "user", "Done, go ahead.", is_prompt=True),
    ]
    return find_commitments(said, calls={"s1": sorted(n for n, _ in runs)}, runs={"s1": list(runs)})


def test_running_every_named_command_resolves() -> None:
    promise = "Once the registry is back, tell me and I'll rerun `npm install` and confirm `npm test` again."
    finding = only(_with_runs(promise, [(6, "npm install --no-audit"), (8, "npm test -- --watch=false")]))
    assert (finding.resolved_at, finding.resolved_by) == (8, "run")
    # one of the two is not enough, nor is a run before the promise
    assert only(_with_runs(promise, [(6, "npm install")])).resolved_at is None
    assert only(_with_runs(promise, [(2, "npm install"), (2, "npm test")])).resolved_at is None


def test_a_placeholder_ends_the_named_command() -> None:
    promise = "Give me the remote URL and I'll run `git remote add origin <URL>` and `git push -u origin main`."
    runs = [(6, "git remote add origin https://example.invalid/r.git"), (8, "git push -u origin main")]
    assert only(_with_runs(promise, runs)).resolved_by == "run"


@pytest.mark.parametrize("promise", [
    "Send me the log and I'll look at `config.yaml` again.",  # a file, not a command
    "Send me the log and I'll run `pytest` again.",  # one word could be any run of the program
])
def test_what_names_no_command(promise: str) -> None:
    assert only(_with_runs(promise, [(6, "pytest -q config.yaml")])).resolved_at is None


# -- answered: the user's next message gives what a hand-off waited for -----------------------------------
def _answered(promise: str, reply: str, answer: str | None = "On it.", *, before: Sequence[str] = ()) -> CommitmentFinding:
    """The promise ends the agent's turn (line 3); `before` are messages the harness puts in the user's
    name first (lines 5, 7, …), then the user's reply, then the agent's `answer` (if any)."""
    said = [Message("s1", 1, "user", PROMPT, is_prompt=True), Message("s1", 3, "assistant", promise)]
    line = 5
    for text in (*before, reply):
        said.append(Message("s1", line, "user", text, is_prompt=True))
        line += 2
    if answer is not None:
        said.append(Message("s1", line, "assistant", answer))
    return only(find_commitments(said))


@pytest.mark.parametrize(("promise", "reply"), [
    ("Once the cable is in, tell me and I'll start the container.", "okay done"),
    ("Install figlet first; once that's done, let me know and I'll generate a few banners.", "figlet is done"),
    ("When you're ready, switch me out of plan mode and I'll write the plan file.", "Implement the plan."),
    ("Sobald du die Preise schickst, aktualisiere ich die Preisliste.", "fertig, mach weiter"),
    ("Cuando me envíes los datos, prepararé el informe mensual de ventas.", "listo, ya te los mandé"),
    ("你装好驱动以后告诉我，我就重新跑一遍测试。", "好了，装好了"),
    ("드라이버 설치가 끝나면 알려주세요. 그러면 테스트를 다시 실행할게요.", "네 완료했어요"),
])
def test_a_short_go_ahead_answers_a_hand_off(promise: str, reply: str) -> None:
    finding = _answered(promise, reply)
    assert finding.why in ("handoff", "sequencing")
    assert (finding.resolved_at, finding.resolved_by) == (7, "answered")


def test_the_link_it_asked_for_answers_it() -> None:
    finding = _answered("Share the links and I'll compare them against what we have.",
                        "https://example.invalid/a https://example.invalid/b these two, the second is older")
    assert (finding.resolved_at, finding.resolved_by) == (7, "answered")
    # a link the promise did not ask for is no answer
    assert _answered("Once the cable is in, tell me and I'll start the container.",
                     "see https://example.invalid/x about the cable, it is long and confusing").resolved_at is None


def test_what_the_user_ran_themselves_is_not_the_reply() -> None:
    echoes = ("<bash-input>sudo ip link set eth0 up</bash-input>", "<bash-stdout></bash-stdout>", "[Image #1]")
    finding = _answered("Once those are done, tell me and I'll start the container.", "okay done", before=echoes)
    assert (finding.resolved_at, finding.resolved_by) == (13, "answered")
    # with no reply of the user's own, nothing was answered
    assert _answered("Once those are done, tell me and I'll start the container.", echoes[0]).resolved_at is None


@pytest.mark.parametrize(("promise", "reply", "answer"), [
    # the user turned to something else: a long reply, or a question
    ("Let me know once the scaffold exists and I'll pick up from there.",
     "lets go ahead and push this up to our repo, it should be connected to coda", "Pushed."),
    ("Let me know once the scaffold exists and I'll pick up from there.", "ok but which folder?", "The app folder."),
    # no go-ahead in the reply
    ("After it's done, come back here and I'll help you format the data partition.",
     "now we need to move the download to the stick", "Copying it."),
    # the agent asks again for what it waits on
    ("Magst du die offenen Punkte nennen? Danach finalize ich die Spezifikation.", "ja",
     "Sobald du diese Punkte beantwortest, aktualisiere ich die Spezifikation."),
    # nobody answered before the session ended
    ("Once the cable is in, tell me and I'll start the container.", "okay done", None),
])
def test_what_does_not_answer_it(promise: str, reply: str, answer: str | None) -> None:
    assert _answered(promise, reply, answer).resolved_at is None


def test_a_promise_that_waits_on_no_one_is_not_answered() -> None:
    """A deferral waits on an event, not on the user: "ok" from the user does not keep it."""
    finding = _answered("I'll open a follow-up PR to remove the compatibility shim once staging runs 4.2.", "ok")
    assert finding.why not in ("handoff", "sequencing")
    assert finding.resolved_at is None


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=61, max_size=200))
def test_a_long_reply_never_answers(reply: str) -> None:
    assert _answered("Once those are done, tell me and I'll start the container.", f"done {reply}").resolved_at is None


def test_a_promise_awaiting_a_go_ahead_is_answered_by_it() -> None:
    """"Confirm option 1 and my next message gives you the code" waits on a decision, not on work."""
    finding = _answered("确认一下用第 2 种，我下一条就直接给你完整的配置文件。", "行，那你试一下2")
    assert (finding.resolved_at, finding.resolved_by) == (7, "answered")
    assert _answered("确认一下用第 2 种，我下一条就直接给你完整的配置文件。", "第 2 种会更慢吗？").resolved_at is None


def test_a_promise_awaiting_the_users_answer_is_answered_by_any_reply() -> None:
    promise = "等待你的回答，然后我会根据你的解释给出反馈，再继续下一个问题。"
    reply = "我觉得缓存命中取决于前缀是否完全相同，所以时间戳放在系统提示里会让每次请求都错过缓存，应该放到后面的消息里。"
    assert len(reply) > 40
    finding = _answered(promise, reply, "回答得很好。")
    assert (finding.resolved_at, finding.resolved_by) == (7, "answered")
    # a question back is no answer yet
    assert _answered(promise, "前缀是什么意思？", "前缀是请求开头不变的部分。").resolved_at is None


@pytest.mark.parametrize("reply", [
    "not done yet", "no, don't run it", "I'm not sure how", "it won't start", "ok it still fails",
    "还没完成", "不行，装不上", "好像还是报错", "测试失败了", "运行报错",
    "네트워크 오류가 나요", "예외가 발생했어요", "계속 실패해요", "los tests fallan", "sigue fallando",
    "nein, mach das nicht", "нет, не продолжай",
])
def test_a_refusal_or_a_failure_is_no_go_ahead(reply: str) -> None:
    """Words of a go-ahead inside a reply that says no, not yet, or that something fails (好 in 好像,
    行 in 运行, 예 in 예외) do not keep the promise."""
    assert not pp.go_ahead(reply)
    assert _answered("Once the cable is in, tell me and I'll start the container.", reply).resolved_at is None


def test_only_a_decision_asked_of_the_user_waits_on_a_go_ahead() -> None:
    # the agent confirming something itself waits on no one: "ok" does not keep it
    assert _answered("I'll confirm the shim can be removed once staging runs 4.2.", "ok").resolved_at is None
    assert pp.awaits_decision("确认一下用第 1 种，我下一条就直接给你完整文件代码。")
    assert not pp.awaits_decision("I'll confirm the shim can be removed once staging runs 4.2.")


def test_a_quiz_given_up_is_not_answered() -> None:
    promise = "等待你的回答，然后我会根据你的解释给出反馈，再继续下一个问题。"
    assert _answered(promise, "算了，不做题了。帮我把登录页的 bug 修一下。", "好的。").resolved_at is None
    assert _answered("Send me your answer and I'll grade it against the rubric.",
                     "Actually forget the quiz, fix the login bug instead.", "Sure.").resolved_at is None
    assert not pp.awaits_answer("Once you reply to the reviewer, I'll merge the PR.")


def test_a_link_with_a_question_is_no_answer() -> None:
    assert _answered("Share the links and I'll compare them against what we have.",
                     "https://example.invalid/a why does this one 404?").resolved_at is None


def test_a_reply_that_opens_with_markup_or_an_image_is_still_the_reply() -> None:
    finding = _answered("Once those are done, tell me and I'll start the container.", "[Image #1] ok done")
    assert (finding.resolved_at, finding.resolved_by) == (7, "answered")
