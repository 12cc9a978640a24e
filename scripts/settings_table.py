"""Prints the README's configuration reference table from the Settings model (tests check they agree)."""

from mcp_classifier.settings import ENV_PREFIX, Settings


def table() -> str:
    rows = ["| setting | env var | CLI flag | default | what it does |", "|---|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        default = "(unset)" if field.default is None else f"`{field.default}`"
        description = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{name}` | `{ENV_PREFIX}{name.upper()}` | `--{name.replace('_', '-')}` | {default} | {description} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
