"""What the identifiers in a request say about the tool it needs, as words BM25 can match.

Requests to an assistant carry the very values a tool takes: "summarize https://…/post-123", "add Sam
to #proj-atlas", "mark MOB-311 as blocked by MOB-298", "show the README of acme/terraform-modules".
Their shape names the parameter (a URL, a channel, an issue key, a repository), but neither a small
sentence encoder nor BM25 sees a parameter's name in "#proj-atlas". So each shape found in a request
adds the words tools use for such a parameter (`url`, `channel`, `issue_key`, `repo`) to the query
BM25 matches against the tools' keyword text, which lists their parameters. The encoder's query is
left as written.

Hand-written: which identifier shapes name which parameter is the product's own knowledge of tool
APIs; no library maps "#name" to a channel. Written from the identifier formats of common services,
then measured on the project's tool sets (docs/decisions/0029-tool-identifier-words.md).
"""

from __future__ import annotations

import re

# A URI with a scheme: an http(s) one is a web page; any other (s3://, gs://, ftp://) is named by its
# own scheme word, which the request already carries, and must not read as a filesystem path below.
_WEB_URL = re.compile(r"https?://\S+|\bwww\.\S+", re.IGNORECASE)
_OTHER_URI = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)

# identifier shape -> the words tools use for a parameter that takes it
IDENTIFIER_WORDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"), "email address"),
    (re.compile(r"(?<![\w&])#[A-Za-z][\w.-]*"), "channel"),
    (re.compile(r"(?<![\w&])#\d+\b"), "number id"),
    (re.compile(r"(?<![\w:])/[\w.-]+(?:/[\w.-]*)+"), "path file folder"),
    (
        re.compile(r"\b[\w-]+\.(?:pdf|docx?|xlsx?|pptx?|csv|txt|md|json|ya?ml|png|jpe?g|gif|zip|log|py|js|ts)\b", re.IGNORECASE),
        "file path",
    ),
    (re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d+\b"), "issue key ticket"),  # JIRA-123, MOB-311
    (re.compile(r"(?<![/\w.@])[A-Za-z][\w.-]*/[A-Za-z][\w.-]*(?![/\w])"), "repo repository owner"),  # acme/webapp
    (re.compile(r"\b\w+\s*(?:!=|>=|<=|=|>|<)\s*\S+"), "query filter"),  # status = "In Progress", created > -7d
    (re.compile(r"\bselect\b.+?\bfrom\b", re.IGNORECASE), "sql query"),
    (re.compile(r"(?<![\w.])@[A-Za-z][\w.-]*"), "user mention"),
    (re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"), "commit sha ref"),
)
WEB_URL_WORDS = "url link page web"


def identifier_words(query: str) -> str:
    """The parameter words for the identifier shapes in a request, each word once; "" when it has none."""
    found: list[str] = WEB_URL_WORDS.split() if _WEB_URL.search(query) else []
    rest = _OTHER_URI.sub(" ", _WEB_URL.sub(" ", query))  # a URL's own path is not a file path
    for shape, words in IDENTIFIER_WORDS:
        if shape.search(rest):
            found.extend(words.split())
    return " ".join(dict.fromkeys(found))


def keyword_query(query: str) -> str:
    """The request as BM25 matches it: its own words, then its identifiers' parameter words."""
    words = identifier_words(query)
    return f"{query} {words}" if words else query
