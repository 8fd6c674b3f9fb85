"""Context selection for the coding workflow (a context skill: ratchet.context.skills).

select(playbook, task, budget_tokens) -> the text appended to the system prompt. Plain strings in
and out: it runs in the workflow's sandbox, where ratchet cannot be imported and the sentence
encoder cannot be loaded. So a lesson's relevance to the problem is measured by shared words with
the package's ``ratchet.context.lexical`` (copied into the sandbox by the run config's
``workflow.libraries``): the mean of the problem's similarity to the lesson and to the problem the
lesson was learned from, and a lesson under MIN_RELEVANCE stays out however much budget is left.
"""

import re

try:  # in the sandbox: the library file workflow.libraries copies in
    from lexical import MIN_RELEVANCE, relevance
except ImportError:  # in the library (ratchet.context.skills.ContextSkills), the same module
    from ratchet.context.lexical import MIN_RELEVANCE, relevance

HEADER = "\n\nLessons learned on earlier problems (follow those that apply):\n"
ITEM = re.compile(r"^- \[(ctx-\d+)\] \(\+(\d+)/-(\d+)\) (.*?)(?: <!--(.*)-->)?$")
ORIGIN = re.compile(r" task=(.*?)\s*$")


def select(playbook, task, budget_tokens):
    items = []
    for line in playbook.splitlines():
        match = ITEM.match(line.strip())
        if match:
            key, helpful, harmful, text, comment = match.groups()
            origin = ORIGIN.search(comment or "")
            score = relevance(task, text, origin.group(1) if origin else "")
            if score >= MIN_RELEVANCE:
                items.append((int(harmful) - int(helpful), -score, key, text))
    chosen, used = [], 0
    for _, _, key, text in sorted(items):  # best record first, then the most relevant, then the oldest id
        line = f"[{key}] {text}"
        cost = max(1, (len(line) + 3) // 4)  # about four characters a token
        if used + cost > budget_tokens:
            continue
        chosen.append(line)
        used += cost
    return HEADER + "\n".join(chosen) + "\n" if chosen else ""
