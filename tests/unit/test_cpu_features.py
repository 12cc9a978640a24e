"""The AMX check behind the encoder's --dtype bfloat16 suggestion, on /proc/cpuinfo texts written here."""

from __future__ import annotations

from pathlib import Path

import torch

from mcp_classifier.engine.cpu_features import amx_bf16_available, cpu_flags

SAPPHIRE_RAPIDS = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8481C
flags\t\t: fpu vme avx512f avx512_bf16 amx_bf16 amx_tile amx_int8
bugs\t\t: spectre_v1

processor\t: 1
flags\t\t: fpu vme
"""
ICE_LAKE = "processor\t: 0\nflags\t\t: fpu avx512f avx512_vnni\n"


def test_flags_are_the_first_processors_and_other_keys_are_ignored() -> None:
    assert cpu_flags(SAPPHIRE_RAPIDS) == {"fpu", "vme", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8"}
    assert cpu_flags("model name : no flags line here\n") == set()


def test_amx_is_seen_only_where_the_cpu_lists_it(tmp_path: Path) -> None:
    with_amx, without = tmp_path / "spr", tmp_path / "icl"
    with_amx.write_text(SAPPHIRE_RAPIDS)
    without.write_text(ICE_LAKE)
    # torch's own oneDNN bf16 check is part of the answer (the flag alone is not enough)
    assert amx_bf16_available(with_amx) is bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    assert amx_bf16_available(without) is False


def test_an_unreadable_cpuinfo_means_no_amx(tmp_path: Path) -> None:
    assert amx_bf16_available(tmp_path / "absent") is False
