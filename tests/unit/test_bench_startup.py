"""The start-up bench's table and verdicts, on figures given to it (the bench itself starts real processes)."""

from __future__ import annotations

from loadtests.bench_startup import Start, render


def test_the_table_shows_medians_per_mode_and_cache_and_the_targets_verdicts() -> None:
    starts = [
        Start("local", "cold", 0.6, 9.0),
        Start("local", "cold", 0.8, 11.0),
        Start("local", "warm", 0.5, 5.0),
        Start("local", "warm", 0.7, 7.0),
        Start("stdio", "cold", 0.9, 10.0),
        Start("stdio", "warm", 0.9, 6.0),
    ]
    table = render(4.0, starts, rounds=2)
    assert "| `serve --backend local` | cold | 0.70 | 10.00 | 2.50 |" in table
    assert "| `serve --backend local` | warm | 0.60 | 6.00 | 1.50 |" in table
    assert "| `stdio` | warm | 0.90 | 6.00 | 1.50 |" in table
    assert "handshake within 1 s of the start in every run: met" in table
    assert "local ready, warm, within 1.5x the floor: met (1.50x)" in table


def test_a_slow_handshake_or_a_start_that_never_got_ready_is_said() -> None:
    starts = [Start("local", "cold", 1.4, None), Start("local", "warm", 0.5, 9.0)]
    table = render(4.0, starts, rounds=1)
    assert "| `serve --backend local` | cold | 1.40 | — | — |" in table
    assert "handshake within 1 s of the start in every run: NOT met" in table
    assert "local ready, warm, within 1.5x the floor: NOT met (2.25x)" in table
