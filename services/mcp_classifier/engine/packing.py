"""Several texts in one row of the model's input, each attending only to its own tokens.

A batch of live traffic mixes short and long queries. Padded to its longest text it spends much
of its compute on padding; split into length-sorted calls (batch_plan) it pays a forward's fixed
cost per call. Packed, the texts sit end to end in rows of about ``width`` tokens: the linear
layers, nearly all of a small encoder's cost, see almost only real tokens, and the whole batch is
one call. A block-diagonal attention mask keeps each text to itself and the position ids restart
per text, so each embedding equals the padded one (the encoder checks this at load).

Written here because transformers packs only for flash-attention decoders (from position ids,
on CUDA); an encoder such as MiniLM on CPU, or any model under SDPA, gets no such path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

Pooling = Literal["mean", "cls", "last"]


def pack_rows(lengths: Sequence[int], width: int) -> list[list[int]]:
    """First-fit decreasing: the texts' indices in each row, no row longer than ``width``.

    Rows without room for the shortest text drop out of the scan, so texts as wide as the rows
    (one a row) cost one step each, not one per row already made (1,024 texts: ~0.5 M steps before).

    A text longer than ``width`` gets a row of its own (the caller widens the rows to fit it).
    """
    rows: list[list[int]] = []
    room: list[int] = []
    open_rows: list[int] = []  # rows with room for the shortest text, in order: a full row is never scanned again
    shortest = min(lengths, default=0)
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        length = lengths[index]
        for slot, r in enumerate(open_rows):
            if length <= room[r]:
                rows[r].append(index)
                room[r] -= length
                if room[r] < shortest:
                    del open_rows[slot]
                break
        else:
            rows.append([index])
            room.append(width - length)
            if room[-1] >= shortest:
                open_rows.append(len(rows) - 1)
    return rows


@dataclass(frozen=True)
class PackedBatch:
    """The model's inputs for packed rows, and where each text lies in them."""

    input_ids: np.ndarray  # [rows, width]
    position_ids: np.ndarray  # [rows, width]; restarts at 0 for each text
    segment_ids: np.ndarray  # [rows, width]; the text each token belongs to, a unique negative id per pad
    text_row: np.ndarray  # [texts]
    text_start: np.ndarray  # [texts]; the text's first column in its row
    text_length: np.ndarray  # [texts]

    @property
    def rows(self) -> int:
        return int(self.input_ids.shape[0])

    def take_rows(self, rows: slice) -> PackedBatch:
        """The texts of some rows only, renumbered: one model call of a batch too big for one."""
        keep = np.flatnonzero((self.text_row >= rows.start) & (self.text_row < rows.stop))
        segments = self.segment_ids[rows]
        first_text = int(keep[0]) if len(keep) else 0  # texts are numbered row by row, so a row range holds a run of them
        return PackedBatch(
            self.input_ids[rows],
            self.position_ids[rows],
            np.where(segments >= 0, segments - first_text, segments),
            self.text_row[keep] - rows.start,
            self.text_start[keep],
            self.text_length[keep],
        )


def pack(token_ids: Sequence[Sequence[int]], width: int, pad_id: int) -> tuple[PackedBatch, np.ndarray]:
    """Pack texts into rows of at least ``width`` (wider when one text is longer).

    Returns the batch and, per packed text, its index in ``token_ids`` (the batch lists texts
    row by row, so results come back in that order).
    """
    lengths = [len(ids) for ids in token_ids]
    width = max(width, *lengths) if lengths else width
    layout = pack_rows(lengths, width)
    # Rows as wide as their fullest: padding beyond it would be compute spent on nothing.
    width = max(sum(lengths[i] for i in row) for row in layout) if layout else 0
    shape = (len(layout), width)
    input_ids = np.full(shape, pad_id, dtype=np.int64)
    position_ids = np.zeros(shape, dtype=np.int64)
    segment_ids = -1 - np.arange(len(layout) * width, dtype=np.int64).reshape(shape)
    order = [i for row in layout for i in row]
    text_row = np.empty(len(order), dtype=np.int64)
    text_start = np.empty(len(order), dtype=np.int64)
    text_length = np.empty(len(order), dtype=np.int64)
    slot = 0
    for r, row in enumerate(layout):
        column = 0
        for index in row:
            length = lengths[index]
            input_ids[r, column : column + length] = token_ids[index]
            position_ids[r, column : column + length] = np.arange(length)
            segment_ids[r, column : column + length] = slot
            text_row[slot], text_start[slot], text_length[slot] = r, column, length
            column += length
            slot += 1
    return PackedBatch(input_ids, position_ids, segment_ids, text_row, text_start, text_length), np.asarray(order, dtype=np.int64)


def split_calls(batch: PackedBatch, max_texts: int) -> list[slice]:
    """Consecutive rows per model call, at most ``max_texts`` texts each (a row of more stands alone).

    Bounded by texts rather than rows so a call holds no more tokens than a padded batch of
    ``max_texts`` would: on CPU, larger activations fall out of cache and the matmuls slow down.
    """
    texts_per_row = np.bincount(batch.text_row, minlength=batch.rows)
    calls: list[slice] = []
    first = 0
    while first < batch.rows:
        end, count = first + 1, int(texts_per_row[first])
        while end < batch.rows and count + texts_per_row[end] <= max_texts:
            count += int(texts_per_row[end])
            end += 1
        calls.append(slice(first, end))
        first = end
    return calls


def packed_cost(batch: PackedBatch, calls: Sequence[slice], overhead_tokens: float) -> float:
    """The cost of these calls in batch_plan's units: a call's fixed cost plus the tokens it runs, pads included."""
    width = batch.input_ids.shape[1]
    return sum(overhead_tokens + (call.stop - call.start) * width for call in calls)


def attention_mask(segment_ids: torch.Tensor, *, causal: bool) -> torch.Tensor:
    """[rows, 1, width, width] booleans: a token sees its own text's tokens (the earlier ones only, if causal).

    Each pad has a segment of its own, so its row of the mask is never empty (an empty row makes
    SDPA's softmax NaN, which would not stay in the pad's own output under every kernel).
    """
    mask = segment_ids[:, :, None] == segment_ids[:, None, :]
    if causal:
        width = segment_ids.shape[1]
        mask &= torch.ones(width, width, dtype=torch.bool, device=segment_ids.device).tril()
    return mask[:, None]


def pool_packed(hidden: torch.Tensor, batch: PackedBatch, pooling: Pooling) -> torch.Tensor:
    """One vector per packed text, in the batch's text order: mean of its tokens, its first, or its last."""
    width = hidden.shape[1]
    flat = hidden.reshape(-1, hidden.shape[-1])
    device = hidden.device
    start = torch.from_numpy(batch.text_row * width + batch.text_start).to(device)
    length = torch.from_numpy(batch.text_length).to(device)
    if pooling == "cls":
        return flat[start]
    if pooling == "last":
        return flat[start + length - 1]
    segments = torch.from_numpy(batch.segment_ids.reshape(-1)).to(device)
    real = segments >= 0
    sums = torch.zeros(len(length), flat.shape[-1], dtype=flat.dtype, device=device)
    sums.index_add_(0, segments[real], flat[real])
    return sums / length.unsqueeze(-1).to(flat.dtype)
