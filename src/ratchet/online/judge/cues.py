"""Lexical cues of feedback: a few dozen yes/no features beside the sentence embedding.

The sentence encoder is English-trained and reads "not helpful" close to "helpful"; these cues
give the classifier what it misses: thanks and praise words in several languages, praise that is
negated ("not helpful", "nicht hilfreich"), sarcasm markers (a praise word followed by a jab:
"Great, another essay", "Thanks for nothing", "… Not."), requests for a change ("could you",
"shorter", "bitte", "por favor"), complaints, and the shape of a new question. Each cue is one
regular expression; the classifier learns how much each weighs, so a cue is evidence, not a rule.
"""

from __future__ import annotations

import re

import numpy as np

_PRAISE_WORDS = (
    r"thanks?|thank (?:you|u)|thx|ty|cheers|perfect|great|awesome|excellent|brilliant|love(?:ly)?|nailed|"
    r"spot on|helpful|useful|clear(?:er)?|works?|worked|fixed|exactly|nice|neat|good|beautiful|wonderful|"
    r"amazing|lifesaver|appreciated?|lgtm|clever|best|better|right|correct|reassuring|impressive|fantastic"
)
_NEGATION = r"(?:not|n't|never|hardly|barely|no longer|isn't|wasn't|nicht|kein\w*|pas|no es|nada)"

CUES: dict[str, str] = {
    # thanks and praise, several languages and emoji
    "thanks": r"\b(?:thanks?|thank (?:you|u)|thx|thanx|ty|tysm|cheers|dank\w*|merci|gracias|grazie|obrigad[oa]|valeu|"
              r"bedankt|tack|takk|tak|el(?:ine|lerine|inize) sağlık|dzięki|dziękuję|спасибо|благодарю|teşekkür\w*|sağ ?ol|kiitos|köszönöm|"
              r"(?<!would )(?<!'d )appreciate[ds]?|thnaks|thnx|tnx|kudos|shukriya|dhanyavaa?d|dhanyawaa?d|дякую|děkuj\w*|díky|"
              r"cảm ơn|terima ?kasih|makasih|salamat|mulțumesc|multumesc|köszi|asante|ευχαριστ\w*)\b|감사|고마|덕분|ありがと|谢谢|謝謝|多谢|"
              # scripts whose marks are not word characters, so no \b around them (hi, ar, fa, he, th)
              r"धन्यवाद|शुक्रिया|شكر|ممنون|مرسی|תודה|ขอบคุณ",
    "praise_word": rf"\b(?:{_PRAISE_WORDS})\b|\b(?:perfekt|genial|super|toll|parfait|excellent|génial|perfecto|"
                   r"excelente|genial|útil|top|perfetto|perfeito|ótimo|chiarissimo|geweldig|prima|świetnie|"
                   r"doskonale|отлично|супер|класс|harika|mükemmel|precis|klasse|richtig|elegant|clicks|cool|"
                   r"perfectly|nicely|well put|well (?:explained|done|written)|much (?:easier|simpler|cleaner|clearer)|"
                   r"i (?:really )?(?:like|love) (?:that|this|it|the|how)|ottim[oaie]|bravo|brava|chiar[oa]|fantastic[oa]?|"
                   r"perfeit[oa]|brilhante|buen[íi]sim[oa]|muy bien|nickel|impeccable|top|idéal|duidelijk|helder|"
                   r"precies|świetn\w*|idealn\w*|идеальн\w*|понятно|süper|toppen|godt|bra|genius|made my day|"
                   r"cracked me up|bellissim\w*|bell[oa]|giust[oa]|you'?re a (?:star|hero|legend|genius|wizard|gem|lifesaver)|"
                   # terse and slang praise: the whole message is often this one word ("legend", "sweet", "gg")
                   r"sweet|legend(?:ary)?|flawless|superb|stellar|solid|gold|slaps|gg|clutch|bingo|dope|banger|crisp|"
                   r"top[- ]notch|top tier|on point|kudos|gorgeous|pitch perfect|works like a charm|like a charm|"
                   # praise words of languages the list above lacked (hi in Latin script, uk, cs, vi, id, tl, ro, sv, pl, el)
                   r"badhiya|zabardast|mast|ekdum sahi|чудово|класно|дуже добре|skvěl\w*|výborn\w*|tuyệt(?: vời)?|"
                   r"mantap|bagus|keren|galing|astig|minunat|klockren\w*|bomba|τέλει\w*|υπέροχ\w*|heerlijk|"
                   r"show de bola)\b|बढ़िया|शानदार|बहुत अच्छा|ممتاز|رائع|عالی|מעולה|מצוין|אחלה|ดีมาก|완벽|좋네|좋아|최고|훌륭|잘\s?(?:해|했|하셨|되|됐|만들)|完璧|完美|太好了|すごい|"
                   r"素晴らし|分かりやすい|わかりやすい|助かり|いいね|清楚|厉害|很棒|真棒|棒极",
    "praise_emoji": r"[👍🙏🔥🎉❤💯👌😍🥳✅🙌😊🙂]|\b10/10\b|chef'?s kiss",
    # the person understands now: praise of an explanation ("finally I get it", "이제 이해됐어요")
    "understood_now": r"\b(?:(?:finally|now) i (?:get|understand|see)|makes (?:total |perfect )?sense|finalmente|endlich|"
                      r"enfin|por fin|agora entendi|eindelijk|nareszcie|наконец|anladım|verstanden|compris|"
                      r"entend[íi]|capito|begrijp \w+ het|понял\w*|zrozumiał\w*)\b|이해(?:가 )?(?:됐|됩|했|돼)|"
                      r"わかりました|分かりました|理解でき|明白了|懂了|清楚了|看懂",
    # the reply met the goal the person had: "that's the tone I was going for", "genau so", "まさに"
    "goal_met": r"\b(?:that'?s|this is|just|exactly|precisely|was) (?:(?!not\b|n't)\w+ ){0,2}(?:what|the \w+|how) "
                r"i (?:was |am )?(?:going for|looking for|hoping for|after|wanted|needed|meant|had in mind)\b|"
                r"\b(?:genau (?:das,? was|so|richtig|was ich)|justo lo que|exactement ce que|esattamente (?:quello|ciò|come)|"
                r"exatamente o que|precies wat|tam (?:olarak )?(?:istediğim|bunu)|dokładnie (?:to|tak)|именно (?:то|так)|"
                r"det var precis)\b|まさに|ちょうど.{0,6}(?:欲しかった|探してた)|바로 이거|딱 (?:원하던|이거)|正是|就是这个|正是我要",
    # a problem the person had is gone: "no more crashes", "not a single error now", "resolveu"
    "fixed_problem": r"\b(?:no more (?:\w+ )?(?:errors?|crash\w*|bugs?|warnings?|failures?|problems?)|"
                     r"not (?:a|one) single (?:\w+ )?(?:error|mistake|bug|typo|warning)|zero (?:errors|bugs|warnings)|"
                     r"(?:errors?|bugs?|crash\w*|issues?|problems?|warnings?) (?:is |are )?(?:all )?gone|"
                     r"(?:solved|resolved|sorted) (?:it|my|the)|resolveu|resolvido|gelöst|résolu|resuelto|"
                     r"risolto|opgelost|rozwiązan\w*|решен\w*|решил\w*|çözüldü|çözdü)\b|解决了|解決し|해결",
    # amusement at the reply: "made me laugh", "haha", 😂
    "amused": r"\b(?:(?:had|made|got) me (?:laugh\w*|smil\w*|giggl\w*)|cracked me up|lol|haha\w*|hehe)\b|😂|🤣|😄|😆",
    # an exclaimed yes: "Yes! That's it.", "Ja!", "はい！"
    "exclaimed_yes": r"^\W*(?:yes+|yep|yay|yup|ja|oui|sí|sì|sim|evet|tak|da|да|jep)\s*!|^\W*(?:はい|네|예|对|是的|没错)\s*[!！]",
    "it_works": r"(?<!non )(?<!no )(?<!não )(?<!nie )(?<!не )(?<!nicht )(?<!ne )(?<!niet )(?<!inte )\b(?:works|worked|fixed it|passes|compiles|that did it|all good|that'?s the one|that was it|"
                r"did the trick|ship it|funktioniert|geklappt|funciona|funcionou|funziona|marche|działa|работает|"
                r"çalıştı|werkt|fungerar)\b|動いた|好用|잘 되",
    # praise negated: a correction, not praise
    "negated_praise": rf"\b{_NEGATION}\s+(?:\w+\s+){{0,2}}(?:{_PRAISE_WORDS}|hilfreich|utile|útil)\b",
    "not_at_start": r"^\W*(?:not|isn'?t|wasn'?t)\b",
    # negated negatives: praise ("not bad", "no complaints", "can't complain", "couldn't be better")
    "negated_negative": r"\b(?:not bad|no complaints|can'?t complain|couldn'?t (?:have )?(?:asked|be) for a better|"
                        r"couldn'?t be better|nothing to add|no notes|not gonna lie|no problem|"
                        # a fault looked for and not found, or nothing better imaginable: praise, however negated
                        r"can'?t (?:fault|argue with)|(?:can'?t|couldn'?t) find (?:anything|a thing|much|any\w*) wrong|"
                        r"nothing to (?:fix|object to|add)|couldn'?t have (?:\w+ ){0,2}(?:better|it better)|not too shabby|"
                        r"better than (?:mine|my (?:own|idea|version|attempt|draft|original))|"
                        r"(?:gar |überhaupt )?nicht (?:übel|schlecht)|pas (?:mal|bête|mauvais)|niente male|non (?:è )?male|"
                        r"nada mal|no (?:está|estuvo|es) (?:nada )?mal|nada que objetar|niet slecht|nie(?:źle| najgorzej)|"
                        r"неплохо|непогано|fena değil)\b",
    # sarcasm: praise followed by a jab, or a closing "Not."
    "sarcasm": r"\b(?:great|wonderful|brilliant|cool|wow|oh|fantastic|thanks|very|super)\b[^.!?]{0,6}[,.!]?\s*"
               r"(?:another|a whole|thanks for the|for nothing|now my|an? (?:infinite|wall|lecture|essay)|captain obvious|"
               r"exactly what i needed|very (?:helpful|reassuring|useful))|(?:^|[.!?]\s*)(?:not|nicht|pas)\s*[.!]\s*$|"
               r"(?:error|exception|crash\w*|\bbug|\bfail\w*|\bbroke\w*|\bwrong|\binfinite)\b[^?]{0,60}\bimpressive\b|"
               r"🙃|😒|🤦|\bgee\b|\blove (?:it )?when\b|\bprogress!|\bi'?ve only been (?:\w+ing|\w+ing \w+) for\b|"
               r"\bthanks for nothing\b|\bcaptain obvious\b|\bsmh\b|🙄|\bwaste of time\b|"
               r"\b(?:riveting|very enterprise|yeah right|as if|obviously|sure, i'll)\b|"
               r"\blove how (?:i|you)\b|\bthanks for the (?:deep|in-depth|insight|lecture|essay|novel)|\bon my (?:vacation|holiday)\b",
    # complaints and errors
    # a praise word next to "..." or with a condition: "Brilliant... it crashes", "... great",
    # "Perfect, if I were writing to the Queen", "Works great... if you like exceptions"
    "trailing_praise": rf"\b(?:{_PRAISE_WORDS})\b\s*(?:\.\.\.|…)|(?:\.\.\.|…)\s*(?:{_PRAISE_WORDS})\b|"
                       rf"\b(?:{_PRAISE_WORDS})\b[^.!?]{{0,20}},?\s+if (?:i|you)\b",
    # thanks or praise, then a change anyway: "Thanks, but make it less stiff", "Thanks! Next time ..."
    "praise_then_change": rf"\b(?:{_PRAISE_WORDS}|danke|merci|gracias|grazie|obrigad[oa]|bedankt|dank je|tack|tak|"
                          r"teşekkürler|dzięki|спасибо)\b[^?]{0,45}?\b(?:but|though|however|next time|just|aber|"
                          r"allerdings|jedoch|mais|pero|ma|però|mas|porém|maar|men|ale|но|однако|ama|fakat)\b|"
                          r"(?:谢谢|多谢|感谢|ありがと|감사|고마)[^?？]{0,40}?(?:不过|但是|可是|でも|けど|ただ|그런데|근데|하지만|다만)",
    # the trailing dots of a sigh or an unfinished reproach: "Ok... that's a lot", "Te pregunté en español..."
    "trailing_dots": r"(?:\.\.\.|…)",
    # indirect: a question about the reply that implies it fell short
    "indirect_doubt": r"\b(?:why is (?:it|this|that) so|is there a (?:shorter|simpler|quicker|easier)|have you (?:tried|tested)|"
                      r"did you (?:test|try|run)|what happens (?:when|if)|isn'?t (?:\w+ ){0,3}enough|wasn'?t it|"
                      r"check that|that'?s it\?|a lot of words|would'?ve (?:been|done)|would have (?:been|done)|"
                      r"i was kind of hoping|seems like a lot|that'?s a lot|backwards|my (?:book|tests?|docs?) "
                      r"(?:says?|disagree)|i'?ll (?:just )?(?:debug|rewrite|do) it myself|for the (?:second|third) time|"
                      r"as per my|why (?:are|did|would|do) you (?:still )?|is there a reason (?:you|why)|(?:don'?t|do not) have (?:the )?time|no time for|per my (?:last|earlier)|by the way|i did (?:mention|say|introduce)|you know\b)",
    "complaint": r"\b(?:wrong|incorrect|useless|pointless|broken|crash(?:es|ed)?|bug|error|fails?|failed|meh|nope|nah|"
                 r"nonsense|made up|confusing|vague|harsh|condescending|cold|impersonal|rude|abrupt|waste|nothing)\b|"
                 r"👎|🐛|😬|😩|\b(?:falsch\w*|stimmt nicht|fehler|faux|ne marche pas|no funciona|no es correcto|bof|"
                 r"no sirve|não funciona|non funziona|nie działa|не работает|çalışmıyor|werkt niet|fungerar inte|"
                 r"hilft mir nicht|vaya respuesta|sbagliat\w*|errad[oa]|неправильно|неверно|не так|ошибк\w*|yanlış|"
                 r"fout|źle|błąd|błędn\w*|nie tak|fel|stämmer inte|forkert|virker ikke|está mal|"
                 r"(?:non|no|não|nie|не|nicht|niet|inte) (?:funziona|funciona|funcionou|działa|работает|"
                 r"funktioniert|werkt|fungerar))\b|틀렸|아니|잘못|違う|ちがう|不是这样|有问题|"
                 r"不对|错了|不行|違います|間違",
    "no_at_start": r"^\W*(?:no|nein|non|nope|nah|hmm+ no|not quite|wrong)\b",
    "not_what": r"\b(?:not what i|not how|that'?s not|doesn'?t answer|did(?:n'?t| not) (?:solve|work|help|answer)|"
                r"does(?:n'?t| not) (?:even )?(?:work|run|compile|address)|won'?t (?:even )?(?:run|work|compile)|not even\b|"
                r"no (?:contestaste|respondiste)|nicht beantwortet|pas répondu|non hai risposto|não respondeu|"
                r"ignores? (?:the|my) question|did you even|are you sure|"
                r"i don'?t think|i wouldn'?t call|still (?:broken|wrong|failing))\b",
    "retry": r"\b(?:try again|again|redo|retry|double-check|once more|next time)\b",
    "forgot": r"\b(?:you forgot|forgot|missing|where'?s the|you didn'?t|i told you|i asked|i said|i meant|i wanted|"
              r"i did tell|i was hoping|i only (?:needed|wanted)|i can'?t)\b",
    # a change is asked for
    "polite_request": r"\b(?:please|pls|plz|kindly|could you|can you|would you|could u|can u|cna you|"
                      r"would be (?:nice|better|easier)|i'?d (?:like|prefer|rather)|i would (?:like|prefer|appreciate)|"
                      r"i prefer|bitte|s'il (?:te|vous) pla[iî]t|por favor|puedes|podrías|peux-tu|tu peux|geht das|"
                      r"kannst du|könntest du|per favore|puoi|pode|podes|kun je|kunt u|alsjeblieft|graag|kan du|"
                      r"snälla|proszę|czy możesz|пожалуйста|можешь|lütfen|misschien|\w+\s+m[ıiuü]s[ıiuü]n(?:[ıiuü]z)?)\b|"
                      r"주세요|줄래|주실 수|줄 수|해 줘|해줘|ください|お願い|ていただけ|てもらえ|てくれ|请|請|能不能|能否|别|不要",
    "change_word": r"\b(?:too|shorter|shorten|longer|less|more|instead|rather|only|just|simpler|formal|casual|"
                   r"concise|trim|cut|drop|skip|add|use|make|put|switch|tone|keep|limit|max|sign|end|start|call|"
                   r"kürzer|zu lang|ausführlicher|förmlicher|trop|plus|demasiado|más|formal|"
                   # "muito" is "very" ("muito obrigado"), not "too": only "muito longo" and the like
                   r"muito (?:longo|extens\w*|grande|complicad\w*)|demais|troppo|for lang|"
                   r"te lang|för lång|za dług\w*|слишком|покороче|короче|çok uzun|kısa\w*|корот\w*|"
                   r"wystarczy|basta|reicht|suffit|genoeg|räcker|yeter|достаточно)\b|너무|자세히|짧게|"
                   r"長すぎ|短く|太长|简短|短一点",
    "format_word": r"\b(?:bullet|list|table|json|markdown|headings?|numbered|code block|checklist|plain text|"
                   r"liste|tabla|tabelle)\b",
    "language_word": r"\b(?:german|english|french|spanish|korean|dutch|italian|portuguese|japanese|chinese|russian|"
                     r"polish|turkish|swedish|deutsch|englisch|français|anglais|español|inglés|italiano|"
                     r"português|portugu[eê]s|nederlands|svenska|polsku|по-русски|русском|türkçe|inglese|"
                     r"engels|englisch)\b|한국어|日本語|中文|汉语|英語",
    "name_word": r"\b(?:my name|call me|name'?s|it'?s \w+ here|address(?:ed)? me|greet me)\b",
    # a new question or moving on
    "question": r"\?\s*$",
    "wh_start": r"^\W*(?:what|how|why|where|who|which|when|is|does|do|can|could|and|also|now|next|so|wie|was|et|y|"
                r"und|qu'|c'est quoi|그럼)\b",
    "moving_on": r"\b(?:next question|next task|next:|moving on|move on|different topic|another question|"
                 r"let me try|get back to you|give me a minute|brb|noted|understood|i see|okay|ok|k|hmm|"
                 r"nächste frage|autre question)\b",
    "next_task": r"^\W*(?:next|now|then|and now|ok(?:ay)?,? (?:now|next))\b|\b(?:now|next),? (?:do|write|make|"
                 r"translate|add|let'?s)\b|^\W*(?:ensuite|als nächstes|jetzt noch|ahora|adesso|agora|nu nog|teraz|"
                 r"теперь|şimdi)\b|^\W*(?:次に|次は|接下来|然后|다음으로|다음은|이제)",
    "short": r"^\W*\w+\W*$",
    # quoted text (blanked out before the other cues): mostly words the person wants used
    "quoted": r"«quoted»",
}

_COMPILED = {name: re.compile(pattern, re.IGNORECASE) for name, pattern in CUES.items()}

#: Where a judgement ends and a next request begins: a question at the end, or a word that opens the
#: next task ("now", "also", "next", "what about", and their forms in other languages).
_NEXT = re.compile(r"[?？]\s*$|\b(?:now|next|also|then|what about|how (?:do|would|can|about)|und|et|y|e|ahora|adesso|"
                   r"agora|jetzt|maintenant|а|и|ve|en)\b|次|接下来|那|다음|혹시", re.IGNORECASE)
#: A contrast after the praise turns it into "thanks, but ..." (a correction, the ``praise_then_change`` cue).
_CONTRAST = re.compile(r"\b(?:but|though|however|although|aber|doch|mais|pero|però|ma|mas|porém|maar|men|"
                       r"ale|но|однако|ama|fakat)\b|でも|けど|但|不过|可是|하지만|근데|그런데", re.IGNORECASE)


def _praise_then_next(text: str) -> bool:
    """Praise or thanks in the message's opening words, then a next question or task with no contrast
    between them ("Worked like a charm. Could you also …?", "Genial, funciona! ¿Y si …?"): by the sets'
    label rules that is praise, while "question" and "polite_request" alone pull such a message toward
    neutral or correction. The two in order are a conjunction a linear model cannot form from them."""
    if any(_COMPILED[name].search(text) for name in ("wh_start", "negated_praise", "not_at_start")):
        return False  # "What's the best way to …?" asks, "Not very helpful. What …?" negates: neither praises first
    opening = None
    for name in ("thanks", "praise_word", "praise_emoji"):
        m = _COMPILED[name].search(text, 0, 40)
        if m and (opening is None or m.end() < opening):
            opening = m.end()
    if opening is None:
        return False
    # the judgement ends at the first sentence mark after the praise; the next request follows it
    end = re.search(r"[.!,;:！。，、]|\s[👍🙏👌]", text[opening:])
    if end is None:
        return False
    rest = text[opening + end.end():]
    return bool(_NEXT.search(rest)) and not _CONTRAST.search(rest) and not any(
        _COMPILED[name].search(text) for name in ("complaint", "not_what", "sarcasm", "forgot"))


#: Cues computed from the text by a function rather than one expression (their names follow CUES').
DERIVED = {"praise_then_next": _praise_then_next}
NAMES = (*CUES, *DERIVED)


#: Quoted text is what the person wants written ("Sign it 'Best, Maria'", "End with « Merci »"), not
#: what they think of the reply: its words ("Best", "Cheers") must not read as praise.
QUOTE = "«quoted»"
_QUOTED = re.compile(r"(?<!\w)'[^']{1,80}'(?!\w)|\"[^\"]{1,80}\"|«[^»]{1,80}»|“[^”]{1,80}”|‘[^’]{1,80}’")


def cue_vector(text: str) -> np.ndarray:
    """One 0/1 entry per cue in :data:`CUES` order, read with quoted text blanked out."""
    text = _QUOTED.sub(QUOTE, (text or "").strip())
    found = [bool(rx.search(text)) for rx in _COMPILED.values()] + [bool(f(text)) for f in DERIVED.values()]
    return np.array(found, dtype=np.float32)


def cue_matrix(texts: list[str]) -> np.ndarray:
    return np.stack([cue_vector(t) for t in texts]) if texts else np.zeros((0, len(NAMES)), np.float32)
