"""The hint of a correction: the instruction it states, as an instruction to the assistant.

On-policy distillation conditions a teacher on the hint, as if the user had said it up front. A
complaint ("No, that's wrong.", "Meh.") or a retry request ("Try again.") in the hint makes the
teacher apologise instead of complying, and a polite question ("Could you make it shorter?")
makes it answer the question; so the hint keeps the sentences that state what is wanted, turned
into an imperative ("Make it shorter."), and drops the rest.
"""

from __future__ import annotations

import re

#: Sentences (or clauses) that only complain, judge or ask for a retry: no instruction in them.
_COMPLAINT = (
    r"^\s*(?:no+|nope|nah|meh|hmm+|huh|ugh|wrong|incorrect|not quite|not really)\b[\s.,!?]*$",
    r"\bthat'?s not\b", r"\bwrong\b", r"\bincorrect\b", r"\bnot what i\b",
    r"\b(?:answer|try|do (?:it|that)|say (?:it|that)) again\b", r"\bredo\b", r"\bretry\b", r"^\s*please fix\b",
    r"\b(?:useless|pointless|waste of time)\b", r"\bdid you even\b", r"\bdoes(?:n'?t| not) (?:answer|work|run)\b",
    r"\bwon'?t (?:run|work|compile)\b", r"\bdoesn'?t compile\b",
    r"^\s*(?:not|isn'?t) (?:very |so |super )?(?:helpful|great|good|useful|readable|clear)\b", r"\bstimmt nicht\b", r"\bfalsch\b", r"\bc'est faux\b",
    r"\bne marche pas\b", r"\bno (?:es correcto|funciona)\b", r"틀렸",
)
#: Sentences that only praise (the "Nice, but …" of a change request): no instruction in them either.
_PRAISE = (
    r"^\s*(?:thanks|thank you|thx|nice|great|good start|not bad|cool|ok(?:ay)?|sure|close|nice try)\b[\s.,!]*$",
)
#: Words that make a sentence state what is wanted.
_IMPERATIVE = (
    "add", "always", "answer", "address", "avoid", "be", "call", "cite", "cut", "describe", "do", "don't",
    "double-check", "drop", "end", "explain", "format", "give", "greet", "handle", "include", "keep", "limit",
    "list", "make", "mention", "name", "never", "only", "put", "remove", "rename", "reply", "respond", "say",
    "show", "sign", "skip", "spell", "start", "stick", "suggest", "switch", "tone", "trim", "translate", "use",
    "write", "just", "shorten", "summarize", "summarise", "stop", "less", "more", "one", "no", "plain",
)
_DIRECTIVE = re.compile(
    r"\b(?:please|pls|plz|i(?:'d| would)? (?:want|like|prefer|rather|need)|i was hoping for|should|next time|"
    r"from now on|instead|in (?:german|english|french|spanish|korean|italian|japanese|chinese|portuguese)|"
    r"call me|my name|bitte|s'il (?:te|vous) pla[iî]t|por favor)\b|주세요",
    re.IGNORECASE,
)
_POLITE_LEAD = re.compile(r"^(?:(?:and|so|also|then|just)?\s*(?:this time|next time)?\s*)?"
                         r"(?:(?:could|can|would|will) (?:you|u)(?: please)?|please|pls|plz|kindly)\s+", re.IGNORECASE)
_LEAD = re.compile(r"^(?:and|so|also|then)\s+(?:this time\s+)?", re.IGNORECASE)
_FILLER = re.compile(r"(?:,?\s*\b(?:please|pls|plz)\b[,!]?)|(?:\s*[🙏🙂😊]+)", re.IGNORECASE)
_CONTRAST = re.compile(r"^(?P<lead>[^,]{0,40}?)[,;]?\s+(?:but|though|so)\s+(?P<rest>.+)$", re.IGNORECASE)
_SPLIT = re.compile(r"(?<=[.!?])\s+|\s+[—–-]\s+|\n+")


#: Wants stated without an imperative, and the imperative each states: "I was hoping for a
#: one-liner" -> "Give a one-liner.", "Just the number would have been fine." -> "Give just the
#: number.", "Isn't localStorage enough?" -> "Use localStorage.". Each is tried on every sentence
#: (and clause) before it is read as a directive; the first that matches gives the instruction.
_STATED_WANTS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.IGNORECASE), t) for p, t in (
    ((r"^(?:but |and |so |hm+,? )?i (?:really )?(?P<adv>only |just )?(?:need(?:ed)?|want(?:ed)?|was (?:kind of |sort of )?"
     r"hoping for|'?m going to need|am going to need|asked for) (?!you\b|to\b|it\b|that\b|this\b)(?P<x>[^,;]+?)"
     r"(?P<rest>,? not [^,;]+?)?(?: before\b.*| for (?:a|my)\b.*| now\b.*)?[.!]*$"), "Give {adv}{x}{rest}."),
    ((r"^(?:but |and |so |ok,? |honestly,? )?(?!it\b|that\b|this\b|you\b|i\b)(?P<x>[^,;]+?) would(?:'ve| have)? "
     r"(?:been |be )?(?:fine|enough|plenty|better|nicer|great|easier(?: to \w+)?|more useful|done it|sufficed|"
     r"help(?: me)?(?: more)?)\b.*$"), "Give {x}."),
    ((r"^(?:is there|do you have|got) (?P<x>an? (?:shorter|simpler|quicker|easier|cleaner|faster|more direct)\b[^?]*?)"
     r"(?: of (?:this|that|it))?\?*$"), "Give {x}."),
    (r"^(?:couldn'?t|can'?t|shouldn'?t|wouldn'?t) (?:this|it|that|you) (?:just )?(?:be|use) (?P<x>[^?]+?)\?*$", "Use {x}."),
    (r"^isn'?t (?P<x>(?!it\b|that\b|this\b)[^?]+?) enough(?: for (?:this|that|it)| here)?\?*$", "Use {x}."),
    (r"^isn'?t there (?P<x>an? [^?]+?)(?: for (?:this|that|it))?\?*$", "Use {x}."),
    (r"^(?:hm+,? |but )?i (?:asked|wrote(?: to you)?|said|spoke|messaged you) (?P<x>in (?!a\b|the\b)\w+)\b.*$", "Answer {x}."),
    ((r"^you (?:didn'?t|did not|never) (?P<v>give|add|include|mention|explain|use|say|show|sign)\b (?:me )?"
     r"(?P<x>(?:any |the |a |an )?[^.,;]+?)[.!]*$"), "{v} {x}."),
    (r"^(?:but |and |hm+,? )?(?:my name(?:'s| is)|it'?s|i'?m) (?P<n>[A-Z][\w-]+)(?:,? (?:btw|by the way|not\b.*))?[.!]*$",
     "Call me {n}."),
))
#: Complaints that name what to change ("Too long.", "Why is this so long?"): their instruction
#: is used only when the message states no other ("Too long. One sentence, please." -> the latter).
_IMPLIED_WANTS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.IGNORECASE), t) for p, t in (
    ((r"^(?:(?:way|much|far|a bit|a little|slightly|kind of|a tad|still|waaa+y) )?too (?:long|verbose|wordy)\b[.!]*$|"
     r"^why is (?:it|this|that) so long\?*$|^tl;?dr\?*$|^brevity\b.*$|^that'?s a lot of words\b.*$"),
     "Keep it short."),
    (r"^(?:(?:way|much|far|a bit|a little|slightly|kind of|a tad) )?too (?:formal|stiff|stuffy)\b[.!]*$", "Make it less formal."),
    ((r"^(?:(?:way|much|far|a bit|a little|slightly|kind of|a tad) )?too (?:complicated|complex)\b[.!]*$|"
     r"^you'?re (?:way )?over(?:complicating|engineering)\b.*$"), "Keep it simpler."),
))


def _stated_want(sentence: str, table: tuple[tuple[re.Pattern[str], str], ...] = _STATED_WANTS) -> str | None:
    text = re.sub(r"^[^\w']+|[\s🙏🙂😊🙄👎]+$", "", sentence.strip())
    for pattern, template in table:
        match = pattern.match(text)
        if match:
            parts = {k: (v or "") for k, v in match.groupdict().items()}
            for key in ("adv", "x"):  # a word capitalised only because it began the sentence
                if parts.get(key) and match.start(key) == 0 and parts[key][1:2].islower():
                    parts[key] = parts[key][0].lower() + parts[key][1:]
            out = template.format(**parts).replace("  ", " ")
            return out[:1].upper() + out[1:]
    return None


def _is(patterns: tuple[str, ...], text: str) -> bool:
    return any(re.search(p, text, re.IGNORECASE) for p in patterns)


def _starts_imperative(sentence: str) -> bool:
    return re.sub(r"^[^\w']+", "", sentence).split(" ", 1)[0].lower().strip(",.!?:") in _IMPERATIVE


def _directive(sentence: str) -> bool:
    return _starts_imperative(sentence) or bool(_DIRECTIVE.search(sentence)) or bool(_POLITE_LEAD.match(sentence))


def _imperative(sentence: str) -> str:
    """``"Could you give an example?"`` -> ``"Give an example."``; fillers ("please") removed."""
    text = _POLITE_LEAD.sub("", sentence.strip())
    text = _FILLER.sub("", text).strip(" ,")
    if sentence.rstrip().endswith("?") and _POLITE_LEAD.match(sentence.strip()):
        text = text.rstrip("?").rstrip() + "."
    if text and text[-1] not in ".!?»\"'":
        text += "."
    return text[:1].upper() + text[1:]


def _clauses(correction: str) -> list[str]:
    out = []
    for sentence in _SPLIT.split(correction.strip()):
        sentence = sentence.strip()
        if not sentence:
            continue
        # "Nice, but drop the last paragraph" / "I asked in German, so answer in German": the part
        # after the turn is the instruction when the part before it only judges.
        match = _CONTRAST.match(sentence)
        judged = match and (_is(_PRAISE, match["lead"]) or _is(_COMPLAINT, match["lead"]) or _directive(match["rest"]))
        if judged and not _starts_imperative(match["lead"]) and not _POLITE_LEAD.match(match["lead"]):
            sentence = match["rest"]
        out.append(sentence)
    return out


def _pieces(sentence: str) -> tuple[list[str], list[str]]:
    """(directives, other statements) of one sentence; a sentence that mixes a complaint with an
    instruction ("Try again, and this time cite your sources.") is cut at its commas."""
    want = _stated_want(sentence)
    if want:
        return [want], []
    implied = _stated_want(sentence, _IMPLIED_WANTS)
    if implied:
        return [], [implied]
    complaint = _is(_COMPLAINT, sentence) or _is(_PRAISE, sentence)
    if not complaint and _directive(sentence):
        return [sentence], []
    if "'" not in sentence and '"' not in sentence and "," in sentence:
        clauses = [_LEAD.sub("", c.strip()) for c in sentence.split(",") if c.strip()]
        wants = [w for w in map(_stated_want, clauses) if w]
        if wants:
            return wants, []
        found = [c for c in clauses if _directive(c) and not _is(_COMPLAINT, c) and not _is(_PRAISE, c)]
        if found:
            return found, []
    return [], ([] if complaint or not re.search(r"\w", sentence) else [sentence])


def instruction_of(correction: str) -> str | None:
    """The instruction a correction states, without its complaint, praise and retry request.

    ``"No, that's not how I asked. Always answer in capitals. Please answer again."`` ->
    ``"Always answer in capitals."``; ``"Could you give an example?"`` -> ``"Give an example."``.
    Sentences that state what is wanted are kept when there are any; otherwise every sentence that
    is neither complaint nor praise. None when nothing is left (then the whole correction is the
    only statement of what was wanted).
    """
    directives: list[str] = []
    kept: list[str] = []
    for sentence in _clauses(correction):
        found, other = _pieces(sentence)
        directives += found
        kept += other
    chosen = directives or kept
    return " ".join(_imperative(s) for s in chosen) if chosen else None
