"""The words people use for the actions tools are named after, added to a tool's keyword text.

MCP tools are named after what they do (`create_issue`, `list_merge_requests`, `clear_range`), but
people ask in their own verbs: "file a bug", "pull up MR 77", "wipe out B2:B200". A small
sentence encoder misses many of those, and BM25 cannot match a word the tool never says. So each
action word found in a tool's name brings the everyday verbs for it into the text BM25 matches
(never into the text the encoder embeds, where a word list would blur the vector).

Hand-written: the table is the product's own knowledge of tool naming. WordNet-style synonym
libraries need corpora that cannot be downloaded here, and they give a word's senses, not the
phrasings people use for a tool's action. Written from general usage before the third
tool-retrieval set existed, and measured on it (docs/decisions/0030-tool-action-words.md).
"""

from __future__ import annotations

import re

# action word in a tool's name -> everyday words for it
ACTION_WORDS: dict[str, str] = {
    "list": "show all any which what browse every",
    "get": "show pull fetch details view see look what info check status",
    "read": "show open view contents see what look",
    "search": "find look lookup locate query where which any",
    "find": "search look lookup locate where which",
    "query": "search find look ask run",
    "create": "new add make open start file raise set up spin log",
    "add": "new create put attach insert include",
    "update": "change edit set modify mark rename adjust move",
    "edit": "change update modify fix replace",
    "set": "change update put make adjust",
    "delete": "remove drop wipe erase destroy kill get rid",
    "remove": "delete drop take off wipe kill",
    "clear": "wipe empty erase blank reset",
    "archive": "hide shelve close put away",
    "close": "resolve done finish shut",
    "send": "message text tell notify ping post email dm",
    "post": "send share publish message announce",
    "write": "put save fill type store",
    "upload": "put save store attach push",
    "download": "get fetch grab pull save",
    "run": "execute trigger kick start launch",
    "trigger": "run kick start launch fire",
    "start": "begin launch kick run open",
    "stop": "halt end kill cancel pause",
    "cancel": "stop abort call off kill undo",
    "schedule": "book plan set up arrange calendar",
    "invite": "add share include ask",
    "share": "send give access invite",
    "move": "transfer relocate shift put",
    "copy": "duplicate clone",
    "merge": "combine land ship",
    "approve": "ok accept sign off lgtm",
    "assign": "give hand owner reassign",
    "comment": "reply note say respond",
}

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_LETTERS = re.compile(r"[^a-z]+")


def name_words(name: str) -> list[str]:
    """`github__createIssue`, `create-issue` and `issues.create` all give their lower-case words."""
    return [w for w in _NON_LETTERS.split(_CAMEL_BOUNDARY.sub(" ", name).lower()) if w]


def action_words(name: str) -> str:
    """The everyday words for the actions in a tool's name, each action once; "" when it names none."""
    actions = dict.fromkeys(w for w in name_words(name) if w in ACTION_WORDS)
    return " ".join(ACTION_WORDS[a] for a in actions)
