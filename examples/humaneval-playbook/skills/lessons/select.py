"""Context selection for the coding workflow (a context skill: ratchet.context.skills).

select(playbook, task, budget_tokens) -> the text appended to the system prompt. Plain strings in
and out: it runs in the workflow's sandbox, where ratchet cannot be imported.
"""

import re

HEADER = "\n\nLessons learned on earlier problems (follow those that apply):\n"
ITEM = re.compile(r"^- \[(ctx-\d+)\] \(\+(\d+)/-(\d+)\) (.*?)(?: <!--.*-->)?$")


def select(playbook, task, budget_tokens):
    items = []
    for line in playbook.splitlines():
        match = ITEM.match(line.strip())
        if match:
            key, helpful, harmful, text = match.groups()
            items.append((int(harmful) - int(helpful), key, text))
    chosen, used = [], 0
    for _, key, text in sorted(items):  # best record first, then the oldest id
        line = f"[{key}] {text}"
        cost = max(1, (len(line) + 3) // 4)  # about four characters a token
        if used + cost > budget_tokens:
            continue
        chosen.append(line)
        used += cost
    return HEADER + "\n".join(chosen) + "\n" if chosen else ""
