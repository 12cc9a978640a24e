"""Writes docs/configuration.md, the configuration reference, from the settings groups.

python scripts/settings_table.py           rewrite docs/configuration.md
python scripts/settings_table.py --check   exit 1 when the page is not what the settings say (CI runs this)
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp_classifier.settings import ENV_PREFIX, RENAMED, SETTINGS_GROUPS, settings_fields

PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
HEADER = """# Configuration reference

Every setting is a CLI flag of every command (`--max-text-length`), an environment variable
(`MCP_CLASSIFIER_MAX_TEXT_LENGTH`) and, in the Helm chart, a value the chart turns into that variable.
A flag given on the command line wins over the environment, which wins over the default.
`mcp-classifier serve --help` shows the common groups; `--help-all` shows every group.
Why a default is what it is: [decisions](decisions/README.md).

This page is generated from the settings groups by `python scripts/settings_table.py`; CI checks it is current.
Each section is one group, which the code reads as `settings.<group>` (`settings.batching.batch_size`)"""


def default_cell(default: object) -> str:
    return "(unset)" if default is None else f"`{default}`"


def page() -> str:
    fields = settings_fields()
    renamed = ", ".join(f"`{flat}` is `settings.{group}.{field}`" for (group, field), flat in RENAMED.items())
    parts = [f"{HEADER}; {renamed}.\n"]
    for group in SETTINGS_GROUPS:
        shown = "shown by `--help`" if group.common else "shown by `--help-all`"
        parts.append(f"\n## {group.title}\n\n({shown}; `settings.{group.name}`)\n")
        parts.append("| setting | env var | CLI flag | default | what it does |\n|---|---|---|---|---|")
        for name in group.fields:
            field = fields[name]
            description = (field.description or "").replace("|", "\\|")
            flag = "--" + name.replace("_", "-")
            parts.append(f"| `{name}` | `{ENV_PREFIX}{name.upper()}` | `{flag}` | {default_cell(field.default)} | {description} |")
    return "\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    text = page()
    if "--check" in argv:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE} is not current: run python scripts/settings_table.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
