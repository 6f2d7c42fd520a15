"""How people say they will do something, in nine languages: the phrase families the commitment rules use.

Each family is a grammar pattern, not a list of sentences. For every language (English, Chinese,
Japanese, Korean, German, French, Spanish, Russian, Portuguese) the module knows:

* **first-person future**: the forms that put the speaker's own work in the future ("I'll", "I will",
  "I'm going to", "we'll", chat's "ill" before a verb of doing; "vou …", the future in -rei; 我会/我來/我就/我再; 〜します/〜しておきます; -ㄹ게요/-겠습니다; "ich werde" and the
  verb-second inversion after "dann/danach/sobald …," ("Danach entferne ich …"); "je vais", the future
  in -rai; "voy a", the future in -ré; a perfective first-person verb, with or without я);
* **hand-off**: the speaker's future made conditional on the other party's *action*: a condition on
  "you" ("once you …, I'll", "sobald du …", "你…我就…", "〜たら…します", "…주시면 …게요") or a request
  followed by the speaker's part ("send me X and I'll Y", "пришлите мне, я попробую", "跟我說我來處理");
* **deferral**: words that put the work beyond the current turn (later, tomorrow, next time, a
  follow-up, after something else lands; später, plus tard, más tarde, потом, 稍后, 後で, 나중에);
* **sequencing**: words that only order steps ("then", "after that", dann, danach, ensuite, luego,
  затем, 然后, それから, 그다음): a promise only when the turn ends there;
* **offers**: the other party's *wish* as the condition ("if you want, I can …", "Want me to …?",
  si tu veux, wenn du möchtest, если хочешь, 如果你愿意, よろしければ, 원하시면), and "I can" forms; and a
  **contingency**: the condition is that the work just done did not work ("if it still looks plain,
  tell me the URL and I'll trace it", "if you don't see the button …", "if another error appears …",
  falls es immer noch …, si ça ne marche toujours pas …, если всё ещё …): the speaker thinks the work
  is finished and offers more help should it not be, which is an offer, not work left outstanding;
* **requirements**: "we will want/need/have to …": what something needs, not who will do it;
* **immediate**: words that make the future the very next step (now, first, right away; jetzt,
  zunächst, maintenant, d'abord, ahora, сейчас, сначала, 先, 现在, まず, 먼저): narration;
* **done reports**: completion words (a past form or participle of a verb of doing, or "done":
  written, recorded, erledigt, aktualisiert, mis à jour, actualizado, скачано, 完成, 已, しました, 완료)
  with no "not yet" beside them (not, nicht, pas encore, todavía no, ещё не, 未, 沒, ていません, 못).

`pipeline.consolidator.rules.commitments` decides with these which sentences are promises.
"""

from __future__ import annotations

import re

__all__ = [
    "after_done",
    "awaits_answer",
    "awaits_decision",
    "deferral",
    "first_person_future",
    "go_ahead",
    "handoff",
    "hypothetical",
    "immediate",
    "is_offer",
    "is_requirement",
    "negated",
    "refuses",
    "reports_done",
    "requests_action",
    "sequencing",
    "turns_away",
]

_A = "['’]"
_I = re.IGNORECASE

# -- first-person future ---------------------------------------------------------------------------
# "ill" for "I'll" (chat without the apostrophe or the capital) only before a verb of doing: "ill"
# is also the adjective ("I was ill").
INFORMAL_ILL = (r"(?:\b[Ii]ll|\bIm gonna|\bim gonna|\bI(?:m| am) gonna)\s+(?=(?:do|fix|add|check|look|try|send|"
                r"update|write|make|get|push|run|test|finish|handle|take|clean|merge|commit|review|ping|post|"
                r"set|change|move|rename|remove|delete|deploy|ship|build|open|file|follow|circle|come|report|share|"
                r"upload|rerun|restart|redo|revisit|investigate|dig|sort|wire|hook|write|draft|prepare)\b)")
_EN_FUTURE = re.compile(
    rf"\b(?:I{_A}ll|I will|I shall|I am going to|I{_A}m going to|[Ww]e{_A}ll|[Ww]e will|[Ww]e are going to|"
    rf"[Ww]e{_A}re going to|[Ll]et me)\b|{INFORMAL_ILL}"
)
_ZH_FUTURE = re.compile(
    r"我(?:们|們)?(?:下一条|下一條|下一步|下次|明天|晚些|等下|等一下|待会|待會|回头|回頭)?"
    r"(?:会|會|将|將|来|來|就|再|去|马上|馬上|稍后|稍後|之后|之後|晚点|晚點|回头|回頭|这就|這就)"
)
_JA_DOING = (r"(?:し|やり|送り|直し|入れ|作り|書き|調べ|試し|見|進め|まとめ|対応し|確認し|修正し|追加し|更新し|実装し|"
             r"反映し|削除し|作成し|実施し|実行し|設定し|用意し|再開し|共有し|報告し|連絡し)")
_JA_FUTURE = re.compile(
    r"(?:(?:私|僕|わたし|こちら)(?:が|で|の方で|は)[^。！？]*?)?" + _JA_DOING + r"(?:ます|ておきます|ておく|ましょう)(?![かし])"
)
_KO_FUTURE = re.compile(r"[가-힣](?:게요|게|겠습니다|겠어요)(?=[\s.!,]|$)|(?:해|어|아|여)\s?드(?:립니다|릴게요|리겠습니다)")
_DE_FUTURE = re.compile(
    r"\b(?:ich werde|wir werden|ich kümmere mich|ich melde mich)\b"
    r"|\b(?!(?:habe|hätte|könnte|würde|möchte|sollte|müsste|dürfte|wäre|bitte|danke|gerne)\b)[a-zäöüß]{3,}e\s+ich\b"
    r"|\b(?:dann|danach|anschließend|später|morgen|als nächstes|im anschluss)\s+(?!ich\b)[a-zäöüß]+e?\s+ich\b"
    r"|,\s*(?!ich\b)[a-zäöüß]+e?\s+ich\b",
    _I,
)
_FR_FUTURE = re.compile(
    rf"\b(?:je vais|nous allons|on va|je m{_A}en occupe|je (?:te|vous) (?:dis|préviens|envoie|renvoie))\b"
    rf"|\b(?:je|j{_A})\s*(?:(?:l|le|la|les|te|vous|en|y){_A}?\s*)?[a-zéèêàâîôûç]+rai\b"
    rf"|\bnous\s+(?:(?:l|le|la|les|vous|en|y){_A}?\s*)?[a-zéèêàâîôûç]+rons\b"
    r"|\bon\s+(?:fera|ajoutera|corrigera|mettra|reprendra|traitera|complètera|complétera|finira|verra|passera|regardera)\b",
    _I,
)
_ES_FUTURE = re.compile(r"\b(?:voy a|vamos a|me encargo|te (?:aviso|envío|mando|paso))\b|\b[a-záéíóúñ]+(?:aré|eré|iré)\b", _I)
_RU_FUTURE = re.compile(
    r"\bя\s+(?:не\s+)?(?:буду\s+)?[а-яё]+(?:ю|у|ам)\b"
    r"|(?:^|[,—–-]\s*|\b(?:потом|затем|позже|тогда|и)\s+)"
    r"(?:по|при|пере|пред|до|за|на|об|от|вы|раз|рас|про|под|с|у|о)[а-яё]{2,}(?:ю|у)\b",
    _I,
)
_PT_FUTURE = re.compile(
    r"\b(?:vou|vamos|irei|iremos)\s+(?!embora\b)[a-záéíóúâêôãõç]+(?:ar|er|ir)\b|\b(?:eu\s+)?[a-záéíóúâêôãõç]{3,}(?:arei|erei|irei)\b"
    r"|\b(?:te|lhe|vos) (?:aviso|envio|mando|passo)\b",
    _I,
)
_FUTURES = (_EN_FUTURE, _ZH_FUTURE, _JA_FUTURE, _KO_FUTURE, _DE_FUTURE, _FR_FUTURE, _ES_FUTURE, _RU_FUTURE, _PT_FUTURE)


def first_person_future(sentence: str) -> re.Match[str] | None:
    """Where the speaker's own future work starts in `sentence`, if it has any (earliest match)."""
    best: re.Match[str] | None = None
    for pattern in _FUTURES:
        match = pattern.search(sentence)
        if match and (best is None or match.start() < best.start()):
            best = match
    return best


# -- offers, requirements, negation, immediacy -----------------------------------------------------
_OFFER = re.compile(
    r"\bif (?:you|u) (?:want|wish|like|prefer|need|would like|'d like)\b|\bif you(?:'d| would)? like\b|\bif needed\b|"
    r"\bif (?:that|this) helps\b|\bwant me to\b|\bshould I\b|\bshall I\b|\bwould you like\b|\bdo you want\b|"
    r"\bhappy to\b|\bI can\b|\bI could\b|\bwe can\b|\bwe could\b|\bI(?:'d| would) be glad\b|\bfeel free\b|"
    r"\bunless you\b|\blet me know if\b|"
    # an open request for the other party's choice, or a contingency, is an offer of service
    rf"\b(?:you|they|he|she)(?:{_A}d| would)? (?:like|want|wants|prefer|need|needs|wish)\b|\bwhat(?:ever)? you (?:want|need|prefer)\b|"
    r"\bif\b[^,.;]{0,60}\bneeds?\b|"
    r"\bif (?:you|u) (?:see|hit|run into|notice|encounter|spot|can|could|are able|have any|get any)\b|"
    # a contingency: the work just done may not have worked (module docstring)
    rf"\bif\b[^,.;:]{{0,60}}?\b(?:still|again|(?:does|do|did|is|are|was|were|wo|ca)n{_A}?t|(?:does|do|did|is|are) not|"
    r"fails?|persists?|breaks?|(?:re)?appears?|shows? up|comes? back|goes wrong|any (?:other |more )?(?:errors?|issues?|problems?))\b|"
    r"\b(?:wenn|falls)\b[^,.;:]{0,60}?\b(?:immer noch|weiterhin|wieder|nicht)\b|"
    r"\bsi\b[^,.;:]{0,60}?\b(?:toujours|encore|ne [a-zé]+ pas|sigue|todavía|no funciona)\b|"
    r"\bесли\b[^,.;:]{0,60}?\b(?:вс[её] ещ[её]|снова|опять|не)\b|"
    r"如果(?:还是|還是|仍然|依然|再次)|还是不行|還是不行|"
    rf"\b(?:I{_A}ll|I will)\s+(?:proceed|continue|go ahead|do it|do that|do so|help|take it from there|get started|"
    r"start|execute it|pivot|handle it|handle that|assist|adjust|look into it|take a look|dig in)\b[\s.!]*$|"
    r"如果你(?:愿意|願意|想|需要|要)|你(?:要|想)的话|你(?:要|想)的話|需要的话|需要的話|要不要|是否|我可以|可以吗|可以嗎|"

    r"よろしければ|必要であれば|必要なら|ご希望|しましょうか|しますか|できます|"
    r"원하시면|원하면|필요하시면|필요하면|할까요|드릴까요|수 있어요|수 있습니다|"
    r"\b(?:wenn|falls) (?:du|Sie) (?:möchtest|möchten|willst|wollen|magst|mögen|wünschst|wünschen)\b|\bsoll ich\b|"
    r"\bmöchtest du, dass ich\b|\bich kann\b|\bgerne? kann ich\b|"
    r"\bsi (?:tu|vous) (?:veux|voulez|le souhaites|le souhaitez|souhaites|souhaitez|préfères|préférez)\b|"
    r"\bsouhaites-tu\b|\bsouhaitez-vous\b|\bveux-tu\b|\bvoulez-vous\b|\bje peux\b|\bje suis prêt\b|"
    r"\bsi (?:quieres|prefieres|lo deseas|lo prefieres|necesitas)\b|\bquieres que\b|\bpuedo\b|"
    r"\bse (?:você|voce|tu) (?:quiser|preferir|precisar)\b|\bquer que eu\b|\bposso\b|\bpodemos\b|"
    r"\b(?:если|когда) (?:хочешь|хотите|захочешь|захотите|нужно|нужна|нужен|нужны|надо|понадобится)\b|"
    r"\bмогу\b|\bхочешь,? (?:я|чтобы)\b|\bхотите,? (?:я|чтобы)\b|"
    # an opinion or a recommendation is not work promised
    r"\bI(?:['’]d)? (?:recommend|suggest|think|believe|guess|advise)\b|\bje (?:recommande|conseille|suggère|pense|crois|propose)\b|"
    r"\bich (?:empfehle|denke|glaube|schlage|rate)\b|\b(?:recomiendo|sugiero|creo|pienso)\b|"
    r"\b(?:рекомендую|советую|предлагаю|думаю|считаю)\b|建议|建議|推荐|推薦|觉得|覺得|认为|認為|おすすめ|思います|추천",
    _I,
)
_REQUIREMENT = re.compile(
    rf"\b(?:we|I){_A}?(?:ll| will| shall)\s+(?:also\s+|still\s+|probably\s+|definitely\s+)?"
    r"(?:want|need|have to|require|must|be needing)\b",
    _I,
)
_NEGATED = re.compile(
    rf"\b(?:I|we){_A}?(?:ll| will| shall|{_A}m going to| am going to)\s+(?:not|never)\b|\bwon{_A}t\b|"
    r"我(?:们|們)?(?:不会|不會|不再)|\bich werde nicht\b|\bje ne vais pas\b|\bno voy a\b|\bя не\b",
    _I,
)
_IMMEDIATE = re.compile(
    r"\b(?:now|right away|right now|immediately|first|in a (?:moment|sec(?:ond)?|minute)|quickly|"
    r"next(?!\s+(?:week|month|sprint|release|quarter|year|time|session|night)))\b|"
    r"现在|現在|马上|馬上|先|立即|立刻|这就|這就|まず|今から|これから|すぐ|먼저|지금|바로|"
    r"\b(?:jetzt|sofort|zunächst|zuerst|gleich)\b|\b(?:maintenant|d['’]abord|tout de suite|immédiatement)\b|"
    r"\b(?:ahora|primero|enseguida)\b|\b(?:сейчас|сначала|сразу)\b",
    _I,
)


# "…, so that I can …" (这样我就能…): what the speaker would then be able to do, as "I can" says; "你把日志
# 发给我，我就能定位问题" (no 这样) stays a hand-off, and so does a firm promise before it ("…，我就修复这个
# 问题，这样我们就可以发布了").
_PURPOSE = re.compile(r"(?:这样|這樣|那样|那樣|以便|好让|好讓)[，,\s]*我(?:们|們)?(?:就|才|便)?(?:能|可以)")


def is_offer(sentence: str) -> bool:
    """The other party's wish is the condition, or the speaker only says they can."""
    if _OFFER.search(sentence):
        return True
    purpose = _PURPOSE.search(sentence)
    return purpose is not None and not _ZH_FUTURE.search(sentence[: purpose.start()])


def is_requirement(sentence: str) -> bool:
    """"we will want/need/have to …": what something needs, not a promise of work."""
    return bool(_REQUIREMENT.search(sentence))


_HYPOTHETICAL = re.compile(
    r"\b(?:if|unless|would|could|might|maybe|perhaps|probably|in case|suppose|supposing|whether)\b|"
    r"如果|要是|假如|万一|萬一|もし|만약|만일|\b(?:falls|würde|könnte|vielleicht)\b|"
    r"\b(?:si|quizás|quizá|tal vez|peut-être|pourrait)\b|\b(?:если|возможно|может быть|бы)\b",
    _I,
)


def hypothetical(sentence: str) -> bool:
    """The sentence speaks of what might happen ("if it breaks again …", "would", "maybe")."""
    return bool(_HYPOTHETICAL.search(sentence))


def negated(sentence: str) -> bool:
    return bool(_NEGATED.search(sentence))


def immediate(text: str) -> bool:
    """The work is the very next step ("now", "first", "right away" and their equivalents)."""
    return bool(_IMMEDIATE.search(text))


# -- deferral and sequencing -----------------------------------------------------------------------
_DAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_DEFERRAL = re.compile(
    rf"\b(?:later|tomorrow|tonight|(?:in|as) a follow[- ]up|follow[- ]up (?:PR|pull request|change|commit|issue|ticket|task)|separate (?:PR|change|commit)|next (?:week|month|sprint|release|"
    rf"quarter|year|time|session)|by (?:{_DAY}|the end|end of|eod)|on {_DAY}|when (?:you(?:'re| are) back|I get)|"
    # a time of the day or week still to come: the work is not for this session
    r"after (?:lunch|dinner|breakfast|work|class|school|the (?:weekend|holidays?|break|meeting|call))|"
    r"this (?:afternoon|evening|weekend)|in the (?:morning|afternoon|evening)|"
    rf"(?:after|once|when|until|before) (?!I\b|I{_A}|me\b|reading|checking|looking|running|doing|that\b|which\b)"
    rf"(?:the |this |it |we |they |staging |CI |[A-Za-z_./-]+ )[^,;.]*?\b(?:lands?|merged?|merges|ships?|is deployed|"
    rf"(?:is |are )?released|passes|is done|are done|finish(?:es)?|close[sd]?|runs?|(?:is |are )?ready|is up|"
    rf"wrap(?:s)? up|out)\b|\d{{4}}-\d{{2}}-\d{{2}})\b"
    r"|稍后|稍後|之后再|之後再|以后|以後|回头|回頭|明天|下次|下一条|下一條|晚点|晚點|后续|後續|"
    r"後で|あとで|次回|明日|後ほど|のちほど|"
    r"나중에|다음에|내일|다음 세션|"
    r"\b(?:später|morgen|beim nächsten mal|nächste woche|im nächsten schritt)\b|"
    r"\b(?:plus tard|demain|la prochaine fois|prochaine session)\b|"
    r"\b(?:más tarde|mañana|la próxima vez)\b|\b(?:mais tarde|amanhã|depois|na próxima vez|da próxima vez)\b|"
    r"\b(?:потом|позже|позднее|завтра|в следующий раз)\b",
    _I,
)
_SEQUENCING = re.compile(
    r"\b(?:then|after that|afterwards|next)\b|然后|然後|之后|之後|接着|接著|それから|その後|그다음|그 다음|그러면|"
    r"\b(?:dann|danach|anschließend|als nächstes)\b|\b(?:ensuite|puis|après)\b|\b(?:luego|después)\b|\b(?:em seguida|depois disso)\b|"
    r"\b(?:затем|после этого|дальше|далее)\b",
    _I,
)


def deferral(text: str) -> bool:
    """The work is put beyond the current turn (see the module docstring)."""
    return bool(_DEFERRAL.search(text))


# A condition that something still to come is finished, before the speaker's own part: "Chunk 3 完成后我会…",
# "ビルドが終わったら…します", "완료되면 …겠습니다" (the English "once X lands, I'll" is in `_DEFERRAL`).
_AFTER_DONE = re.compile(
    r"(?:完成|结束|結束|做完|跑完|弄完|搞定|处理完|處理完)(?:后|後|之后|之後|以后|以後|了?再)"
    r"|(?:完了|終了|終わっ|済ん|完成し)(?:たら|た後|てから)"
    r"|(?:완료되|끝나|마치|마무리되)(?:면|고 나면|는 대로)"
)


def after_done(text: str) -> bool:
    """The text puts the work after something still to come is finished (see `_AFTER_DONE`)."""
    return bool(_AFTER_DONE.search(text))


def sequencing(text: str) -> bool:
    return bool(_SEQUENCING.search(text))


# -- hand-offs --------------------------------------------------------------------------------------
_YOU_ACT = (
    r"(?!want|wish|like|prefer|need|would like|'d like)"  # a wish makes it an offer
)
_HANDOFF = re.compile(
    # English: a condition on the other party's action, then the speaker's part
    rf"\b(?:once|when|after|as soon as|whenever|if)\s+(?:you|u)(?:{_A}(?:re|ve|ll))?\s+{_YOU_ACT}[^.?!]*?(?:,|\bthen\b)?\s*"
    rf"(?:I{_A}ll|I will|we{_A}ll|we will)\b"
    # an imperative to the other party opens the clause, then the speaker's part: "Then paste the output
    # here and I'll update the file", "After it's done, come back here and I'll help you …"
    rf"|(?:^|[,;:]\s*|\bthen\s+)(?:please\s+)?(?:come back|paste|run|send|share|switch|give|upload|drop|reply|post|"
    rf"restart|reboot|install|try|rerun|re-run|commit|push|merge|approve|sign in|log in|add)\b[^.?!]*?\band\s+"
    rf"(?:I{_A}ll|I will|we{_A}ll|we will)\b"
    rf"|\b(?:tell|send|give|show|paste|share|point|ping|drop|forward|upload|attach|confirm|approve|let)\s+me\b[^.?!]*?"
    rf"\b(?:and|then|,)\s*(?:I{_A}ll|I will|we{_A}ll)\b"
    rf"|\b(?:tell|show)\s+me\s+(?:where|which|what|how|when)\b[^.?!]*?\b(?:and|,)\s*I{_A}ll\b"
    # Chinese: 你 … 我就/我再/我来 …; a request to tell/send me, then 我来/我就
    r"|你[^。！？?\n]{0,40}?(?:我就|我再|我来|我來|我会|我會|我马上|我馬上|我这边|我這邊)"
    r"|(?:跟我说|跟我說|告诉我|告訴我|发给我|發給我|贴给我|貼給我|给我|給我|通知我)[^。！？?\n]{0,30}?(?:我就|我再|我来|我來|我会|我會)"
    r"|等你[^。！？?\n]{0,40}?(?:我再|我就|我来|我來)"
    # Japanese: 〜たら / 〜れば / 〜次第 (the other party acts) … the speaker's part
    # (the speaker's part is a verb of doing: "…れば地図が育ちます" says what will happen, not who acts)
    r"|(?:たら|れば|次第|いただければ|もらえれば|くだされば)[、,]?[^。！？]{0,160}?[一-龥]{0,6}" + _JA_DOING
    + r"(?:ます|ておきます)(?![かしせ])"
    # Korean: …주시면/하시면/되면 … -ㄹ게요/-겠습니다
    r"|(?:주시면|주면|하시면|되면|끝나면|완료되면|알려주시면|보내주시면)[^.?!\n]{0,80}?(?:게요|겠습니다|드립니다)"
    # German: sobald/wenn/nachdem du …, <verb> ich
    r"|\b(?:sobald|wenn|nachdem|falls)\s+(?:du|ihr|Sie)\b(?![^,]*\b(?:möchtest|willst|magst|wünschst|möchten|wollen)\b)"
    r"[^,.?!]*,\s*[a-zäöüß]+e?\s+ich\b"
    # French: dès que / quand / une fois que tu …, je …
    r"|\b(?:dès que|quand|une fois que|lorsque|si)\s+(?:tu|vous)\s+"
    r"(?!veux|voulez|souhaites|souhaitez|préfères|préférez)[^.?!]*?,\s*(?:je|j['’]|on)\b"
    # Spanish: cuando / en cuanto / una vez que (me) …, …
    r"|\b(?:cuando|en cuanto|una vez que|si)\s+(?:me\s+)?(?!quieres|prefieres|deseas|necesitas)[a-záéíóúñ]+(?:es|as)\b"
    r"[^.?!]*?,\s*(?:te|lo|la|yo)?\s*[a-záéíóúñ]+(?:aré|eré|iré)\b"
    # Portuguese: quando / assim que / depois que você …, (eu) vou … | …rei
    r"|\b(?:quando|assim que|depois que|logo que|se)\s+(?:você|voce|tu)\b(?!\s+(?:quiser|preferir|precisar))[^.?!]*?,\s*"
    r"(?:eu\s+)?(?:vou|vamos|[a-záéíóúâêôãõç]+(?:arei|erei|irei))\b"
    # Russian: когда/как только/если ты|вы …, я …; an imperative, then я + verb
    r"|\b(?:когда|как только|если|после того как)\s+(?:ты|вы)\b(?![^,]*\b(?:хочешь|хотите|нужно)\b)[^,.?!]*,\s*(?:я\s+)?[а-яё]+(?:ю|у)\b"
    r"|(?:^|[\s(«\"→:—–-])(?:[а-яё]{3,}(?:ите|йте|ьте)|дай|скажи|скинь|пришли|укажи|напиши|отправь|покажи|"
    r"запусти|проверь|подтверди|сообщи|вставь|загрузи|выбери|ответь)\b[^.?!]*?[,—–→-]\s*я\s+[а-яё]+\b",
    _I,
)
# A sentence that asks the other party to act (used for "Magst du …? Danach entferne ich …").
_REQUEST = re.compile(
    r"\b(?:please|could you|can you|would you|tell me|send me|let me know|give me|share)\b|"
    r"请|請|麻烦|麻煩|你(?:跑|执行|執行|确认|確認|提供|贴|貼|发|發|告诉|告訴|指定)|"
    r"ください|お願いします|주세요|"
    r"\b(?:bitte|magst du|kannst du|könntest du|gib mir|schick mir|möchtest du mir)\b|"
    r"\b(?:peux-tu|pouvez-vous|merci de|envoie-moi|donne-moi|dis-moi)\b|"
    r"\b(?:puedes|podrías|envíame|dime|pásame)\b|"
    r"\b(?:пришли|пришлите|скинь|укажи|укажите|дай|дайте|напиши|напишите|подскажи|подскажите)\b",
    _I,
)


# A go-ahead is not a hand-off: "if you approve / choose / confirm, I'll …" is a proposal awaiting a
# decision (a question in disguise), not work promised.
_APPROVAL = re.compile(
    r"\b(?:approve[sd]?|validate[sd]?|confirm(?:s|ed)?|agree[sd]?|choose|chooses|pick|select|decide|say (?:yes|go)|"
    r"give (?:me )?the (?:go|green light|ok)|sign off)\b|"
    r"\b(?:valides?|validez|confirmes?|confirmez|choisis|choisissez|approuves?|approuvez|es d['’]accord|êtes d['’]accord)\b|"
    r"\b(?:bestätigst|bestätigen|zustimmst|freigibst|wählst|entscheidest|einverstanden)\b|"
    r"\b(?:apruebas|confirmas|eliges|decides|estás de acuerdo)\b|"
    r"\b(?:подтвердишь|подтвердите|одобришь|одобрите|выберешь|выберете|согласишься|согласитесь)\b|"
    r"确认|確認|同意|选择|選擇|批准|决定|決定|承認|選ん|승인|선택|동의",
    _I,
)


# A decision asked of the other party: "confirm/choose … and I'll …", "once you approve", 确认一下, 你选.
_DECISION_ASKED = re.compile(
    r"\b(?:once|if|when|after) (?:you|u) (?:approve|confirm|choose|pick|select|decide|say (?:yes|go))\b|"
    r"^\s*(?:please )?(?:confirm|choose|pick|approve)\b|"
    r"确认一下|確認一下|请确认|請確認|你(?:确认|確認|选|選|决定|決定)|"
    r"確認(?:して|お願い)|선택해|확인해\s?주|"
    r"\b(?:bestätige|wähle|entscheide)\b|\b(?:confirma|elige)\b|\b(?:confirme|choisis)\b|\b(?:подтверди|выбери)\b",
    _I,
)


def awaits_decision(sentence: str) -> bool:
    """The sentence asks the other party for a go-ahead or a choice before the speaker's part
    ("确认一下用第 1 种，我下一条就…"); the speaker confirming something itself is no such wait."""
    return bool(_DECISION_ASKED.search(sentence))


# The speaker waits for the other party's answer to what it asked (a quiz, a questionnaire): whatever
# they reply is that answer.
_AWAITS_ANSWER = re.compile(
    r"\b(?:your (?:answer|answers|reply|explanation)|your response)\b(?! time)|"
    r"(?:等待|等)你的(?:回答|回复|回覆|答案|解释|解釋)|回答を(?:お待ち|待って)|답변(?:을)? 기다|"
    r"\bdeine Antwort\b|\btu respuesta\b|\bta réponse\b|\bvotre réponse\b|\bsua resposta\b|\bтвой ответ\b|\bваш ответ\b",
    _I,
)


def awaits_answer(sentence: str) -> bool:
    """The sentence waits for the other party's answer (any reply of theirs is it)."""
    return bool(_AWAITS_ANSWER.search(sentence))


def handoff(sentence: str) -> bool:
    """The speaker's part waits on an action of the other party, in the sentence itself (a go-ahead
    or a choice the other party is to make is not such an action). Only the condition is read for a
    go-ahead: the speaker's own part may well say it will check or confirm something ("…を通せれば、
    こちらで動作確認まで進めます")."""
    match = _HANDOFF.search(sentence)
    if match is None:
        return False
    own = [m.start() for p in _FUTURES if (m := p.search(sentence, match.start())) and m.start() > match.start()]
    condition_end = min(own) if own else match.end()
    return not _APPROVAL.search(sentence[:condition_end])


def requests_action(sentence: str) -> bool:
    """The sentence asks the other party to do or give something."""
    return bool(_REQUEST.search(sentence))


# -- reports of work done --------------------------------------------------------------------------
# The completion words of each language: a participle or past form of a verb of doing (written,
# updated, saved, downloaded, …) or a word that says the work is finished (done, erledigt, готово, 完成).
# They only say *that* something was done; `pipeline.consolidator.rules.commitments` decides *what* by the
# words the report shares with the promise.
_DONE = re.compile(
    r"\b(?:done|finished|completed|fixed|updated|added|wrote|written|recorded|saved|created|committed|pushed|"
    r"merged|removed|deleted|installed|downloaded|uploaded|implemented|applied|filled(?: in| out)?|moved|renamed|"
    r"logged|documented|sent|published|replaced|rebuilt|restarted|appended|captured|noted|changed|edited)\b|"
    r"\bI(?:['’]ve| have)\s+(?:now\s+|just\s+|also\s+)?[a-z]+(?:ed|en)\b|"
    r"\b(?:erledigt|fertig|aktualisiert|ergänzt|hinzugefügt|geschrieben|gespeichert|erstellt|angelegt|behoben|"
    r"korrigiert|entfernt|gelöscht|eingearbeitet|eingetragen|ausgefüllt|umgesetzt|implementiert|angepasst|"
    r"übernommen|heruntergeladen|installiert|committet|gepusht|dokumentiert|festgehalten|geändert|vermerkt)\b|"
    r"\b(?:fait|terminé|fini|corrigé|ajouté|mise?s? à jour|écrit|enregistré|créé|supprimé|installé|téléchargé|"
    r"implémenté|appliqué|rempli|complété|envoyé|déplacé|modifié|renseigné|noté|consigné)e?s?\b|"
    r"\b(?:hecho|listo|terminado|corregido|añadido|agregado|actualizado|escrito|guardado|creado|eliminado|"
    r"borrado|instalado|descargado|implementado|aplicado|completado|rellenado|enviado|movido|modificado|"
    r"registrado|anotado)s?\b|"
    r"\b(?:готово|сделан[оаы]?|сделала?|исправил[аои]?|исправлен[оаы]?|добавил[аи]?|добавлен[оаы]?|обновил[аи]?|"
    r"обновлен[оаы]?|записал[аи]?|записан[оаы]?|сохранил[аи]?|сохранен[оаы]?|сохранён|создал[аи]?|создан[оаы]?|"
    r"удалил[аи]?|удален[оаы]?|удалён|установил[аи]?|установлен[оаы]?|скачал[аи]?|скачан[оаы]?|загрузил[аи]?|"
    r"загружен[оаы]?|внесл?[аи]?|внесён|заполнил[аи]?|заполнен[оаы]?|выполнил[аи]?|выполнен[оаы]?)\b|"
    r"完成|搞定|做好|寫好|写好|改好|修好|補上了|补上了|加上了|加好了|更新了|寫入|写入|記錄了|记录了|"
    r"已(?:經|经)?\s*(?:完成|寫|写|更新|加上|加入|補|补|修|改|建立|記錄|记录|新增|提交|commit|push|推送|刪|删|移|下載|下载|安裝|安装|註記|注记)|"
    r"しました|完了|済み|できました|終わりました|書きました|入れました|直しました|送りました|作りました|"
    r"완료|했습니다|했어요|됐습니다|되었습니다|끝났|마쳤",
    _I,
)
# What undoes a completion word: not yet, still to do, never ("nicht", "pas encore", "ещё не", 未, 沒).
_NOT_DONE = re.compile(
    r"\b(?:not|n['’]t|never|yet to|still (?:need|have) to|no longer|nothing)\b|"
    r"\b(?:nicht|noch nicht|kein|keine|nie)\b|\b(?:pas|jamais|rien)\b|\b(?:no|todavía no|aún no|nada)\b|"
    r"\b(?:не|ещё не|еще не|пока не|ни)\b|未|沒|没|不|尚|还没|還沒|ていません|ませんでした|못|않|안\s",
    _I,
)


def reports_done(sentence: str) -> bool:
    """The sentence says work was done (a completion word of any of the eight languages), and nothing
    in it says the work is not done yet. A question or a future is the caller's to rule out."""
    return bool(_DONE.search(sentence)) and not _NOT_DONE.search(sentence)


# -- the other party's go-ahead ---------------------------------------------------------------------
# A short reply that gives the speaker what a hand-off waited for: the other party's part is done
# ("figlet is done", "okay done", "装好了", "fertig"), or the speaker may go on ("yes", "go ahead",
# "Implement the plan.", "行，那你试一下1", "네 진행해주세요"). Only a short reply counts (the caller
# measures it): in a long one these words are about something else ("lets go ahead and push this up
# … ?"). A reply that says no, not yet, or that something still fails is never a go-ahead, whatever
# else it holds ("not done yet", "ok it still fails", "还没完成", "계속 실패해요").
_GO_AHEAD_WORDS = re.compile(
    r"\b(?:done|finished|ready|complete|completed|ok|okay|yes|yep|yeah|yup|sure|go|go ahead|proceed|continue|"
    r"start|begin|implement|do it|run|try|retry|fine|sounds good|all set|installed|"
    r"ja|fertig|erledigt|weiter|mach|passt|jawohl|"
    r"s[ií]|listo|hecho|dale|vale|adelante|contin[uú]a|"
    r"oui|fait|fini|pr[eê]t|vas-y|d['’]accord|"
    r"sim|pronto|feito|pode|beleza|"
    r"да|готово|сделал|сделано|ок|давай|продолжай)\b",
    _I,
)
# A one-character word (好, 行, 是, 네, 예) is a go-ahead only where the reply opens with it: inside a
# longer reply it is part of another word (运行, 网络, 예외). Longer words count anywhere.
_GO_AHEAD_CJK = re.compile(
    r"^\s*(?:好|行|可以|是的?|对|嗯|开始|開始|继续|繼續|执行|執行|はい|좋아|좋습니다|진행)|^\s*(?:네|예)(?=[\s,.!~]|$)|"
    r"完成|搞定|弄好|好了|装好|裝好|没问题|沒問題|完了|できた|できました|終わ|お願いします|進めて|続けて|"
    r"완료|끝났|다 됐|^\s*(?:했어|했습니다|됐어|됐습니다)|계속 진행"
)
_NOT_GO_AHEAD = re.compile(
    r"\b(?:not|no|nope|don['’]?t|doesn['’]?t|didn['’]?t|won['’]?t|can['’]?t|cannot|never|still|yet|fail\w*|error\w*|"
    r"broken|wrong|stop|wait|hold on|forget|never ?mind|instead|nothing|"
    r"nicht|nein|kein\w*|fehler\w*|noch|todav[ií]a|nada|fall\w*|non|pas|erreur|échec|encore|não|nao|erro\w*|falh\w*|"
    r"не|нет|ошибк\w*|ещё|еще)\b|"
    r"不|没|沒|别|別|未|失败|失敗|报错|報錯|错误|錯誤|还是|還是|算了|"
    r"ない|ません|失敗|エラー|だめ|ダメ|まだ|"
    r"안\s|안돼|못|오류|실패|에러|아니|아직",
    _I,
)


def go_ahead(reply: str) -> bool:
    """The reply says the other party's part is done, or that the speaker may go on (any of the eight
    languages), and nothing in it says no, not yet, or that something fails. The caller keeps it to
    short replies that ask nothing."""
    if refuses(reply):
        return False
    return bool(_GO_AHEAD_WORDS.search(reply) or _GO_AHEAD_CJK.search(reply))


def refuses(reply: str) -> bool:
    """The reply says no, not yet, that something still fails, or turns to something else."""
    return bool(_NOT_GO_AHEAD.search(reply))


# The other party leaving what was asked of them for something else: an answer to a quiz holds 不 and
# "not" as any prose does, so only these words say it was given up.
_TURNS_AWAY = re.compile(
    r"\b(?:forget|never ?mind|instead|skip|stop|let['’]?s do something else)\b|算了|不做|不想做|不用了|跳过|跳過|"
    r"やめ|もういい|그만|됐어요 그냥|\b(?:vergiss|lass uns lieber|olvida|oublie|esquece|забудь|хватит)\b",
    _I,
)


def turns_away(reply: str) -> bool:
    """The reply gives up what was asked ("算了，不做题了", "forget the quiz, fix the bug instead")."""
    return bool(_TURNS_AWAY.search(reply))
