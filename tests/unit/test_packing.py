"""Packing texts into rows: every text once, no row over its width, each text seeing only its own tokens."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from mcp_classifier.engine.batch_plan import plan_cost, plan_sub_batches
from mcp_classifier.engine.packing import attention_mask, pack, pack_rows, packed_cost, pool_packed, split_calls

lengths_lists = st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=40)


@given(lengths=lengths_lists, width=st.integers(min_value=1, max_value=128))
def test_rows_hold_every_text_once_and_stay_within_width(lengths: list[int], width: int) -> None:
    rows = pack_rows(lengths, width)
    assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
    for row in rows:
        # a text longer than the width sits alone; otherwise the row fits
        assert len(row) == 1 or sum(lengths[i] for i in row) <= width


def first_fit_decreasing(lengths: list[int], width: int) -> list[list[int]]:
    """The textbook rule, every row scanned for every text: what pack_rows must match exactly."""
    rows: list[list[int]] = []
    room: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        fits = [r for r, free in enumerate(room) if lengths[index] <= free]
        if fits:
            rows[fits[0]].append(index)
            room[fits[0]] -= lengths[index]
        else:
            rows.append([index])
            room.append(width - lengths[index])
    return rows


@given(lengths=lengths_lists, width=st.integers(min_value=1, max_value=128))
def test_rows_are_those_of_first_fit_decreasing(lengths: list[int], width: int) -> None:
    """Skipping full rows changes nothing: a row without room for the shortest text could take none."""
    assert pack_rows(lengths, width) == first_fit_decreasing(lengths, width)


def test_first_fit_fills_rows_before_opening_new_ones() -> None:
    # 10+6 and 8+8 fit rows of 16: two rows, where one text per row would take four
    assert sorted(sorted(r) for r in pack_rows([10, 8, 8, 6], 16)) == [[0, 3], [1, 2]]


@given(lengths=lengths_lists, width=st.integers(min_value=1, max_value=96))
def test_packed_batch_puts_each_text_where_it_says(lengths: list[int], width: int) -> None:
    token_ids = [[100 * (t + 1) + k for k in range(n)] for t, n in enumerate(lengths)]
    batch, order = pack(token_ids, width, pad_id=0)
    assert sorted(order.tolist()) == list(range(len(lengths)))
    for slot, text in enumerate(order):
        row, start, length = batch.text_row[slot], batch.text_start[slot], batch.text_length[slot]
        assert batch.input_ids[row, start : start + length].tolist() == token_ids[text]
        assert batch.position_ids[row, start : start + length].tolist() == list(range(length))
        assert set(batch.segment_ids[row, start : start + length].tolist()) == {slot}
    pads = batch.segment_ids < 0
    assert (batch.input_ids[pads] == 0).all()
    assert len(set(batch.segment_ids[pads].tolist())) == int(pads.sum())  # every pad is its own segment
    assert batch.input_ids.shape[1] == max(sum(lengths[i] for i in order[batch.text_row == r]) for r in range(batch.rows))


def test_taking_rows_renumbers_their_texts_from_zero() -> None:
    batch, order = pack([[1] * 5, [2] * 5, [3] * 5, [4] * 5], width=10, pad_id=0)
    second = batch.take_rows(slice(1, 2))
    assert second.rows == 1
    assert sorted(second.segment_ids[second.segment_ids >= 0].tolist()) == [0] * 5 + [1] * 5
    assert second.text_row.tolist() == [0, 0]


def test_mask_keeps_each_text_to_itself_and_causal_to_the_past() -> None:
    segments = torch.tensor([[0, 0, 1, 1, 1, -6]])
    full = attention_mask(segments, causal=False)[0, 0]
    assert full.shape == (6, 6)
    assert full[0, 1] and full[1, 0] and not full[1, 2] and not full[2, 1]
    assert full[5].tolist() == [False] * 5 + [True]  # a pad sees only itself, so its softmax row is never empty
    causal = attention_mask(segments, causal=True)[0, 0]
    assert causal[3, 2] and not causal[2, 3] and not causal[2, 1]


def test_pooling_reads_each_texts_own_tokens() -> None:
    texts = [[1, 2, 3], [8], [4, 6]]
    batch, order = pack(texts, width=8, pad_id=0)
    hidden = torch.from_numpy(batch.input_ids).float().unsqueeze(-1)  # a token's vector is its id
    in_order = [texts[int(t)] for t in order]
    assert pool_packed(hidden, batch, "mean")[:, 0].tolist() == [sum(t) / len(t) for t in in_order]
    assert pool_packed(hidden, batch, "cls")[:, 0].tolist() == [t[0] for t in in_order]
    assert pool_packed(hidden, batch, "last")[:, 0].tolist() == [t[-1] for t in in_order]


@given(lengths=lengths_lists, width=st.integers(min_value=1, max_value=96), max_texts=st.integers(min_value=1, max_value=8))
def test_calls_cover_the_rows_in_order_and_hold_at_most_max_texts(lengths: list[int], width: int, max_texts: int) -> None:
    batch, _ = pack([[1] * n for n in lengths], width, pad_id=0)
    calls = split_calls(batch, max_texts)
    assert calls[0].start == 0 and calls[-1].stop == batch.rows
    assert all(a.stop == b.start for a, b in zip(calls, calls[1:]))
    for call in calls:
        texts = int(((batch.text_row >= call.start) & (batch.text_row < call.stop)).sum())
        assert texts <= max_texts or call.stop - call.start == 1


def test_packing_costs_less_than_padding_only_where_lengths_are_mixed() -> None:
    def costs(lengths: list[int]) -> tuple[float, float]:
        batch, _ = pack([[1] * n for n in lengths], width=64, pad_id=0)
        ordered = sorted(lengths)
        padded = plan_cost(ordered, plan_sub_batches(ordered, 32, 60.0), 60.0)
        return packed_cost(batch, split_calls(batch, 32), 60.0), padded

    packed, padded = costs([5, 40, 8, 33, 12, 38, 6, 25] * 4)  # live queries: short and long mixed
    assert packed < padded
    packed, padded = costs([27, 28, 29, 28] * 8)  # a tool list: alike lengths, one padded call wastes little
    assert packed >= padded
