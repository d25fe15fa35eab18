"""One compute-capability -> chip table serves the capture (NVML's capability) and attribution (a GPU's name)."""

from __future__ import annotations

import pytest

from profiler_core.metrics.chips import CHIP_BY_CAPABILITY, chip_for_capability, chip_from_name


@pytest.mark.parametrize(
    ("capability", "name"),
    [
        ((8, 0), "ga100"),
        ((8, 7), "ga10b"),
        ((8, 9), "ad102"),
        ((9, 0), "gh100"),
        ((10, 0), "gb100"),
        ((12, 0), "gb202"),
        ((11, 7), None),
        (None, None),
    ],
    ids=["a100", "orin", "l40", "h100-h200", "b200", "rtx-pro-6000", "unknown", "none"],
)
def test_chip_for_capability(capability: tuple[int, int] | None, name: str | None) -> None:
    assert chip_for_capability(capability) == name


@pytest.mark.parametrize(
    ("name", "chip"),
    [
        ("NVIDIA H100 80GB HBM3", "gh100"), ("NVIDIA H200", "gh100"), ("NVIDIA GH200 480GB", "gh100"),
        ("NVIDIA A100-SXM4-80GB", "ga100"), ("NVIDIA B200", "gb100"), ("NVIDIA GeForce RTX 5090", "gb202"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "gb202"), ("NVIDIA GeForce RTX 4090", "ad102"),
        ("NVIDIA L40S", "ad102"), ("NVIDIA L4", "ad104"), ("NVIDIA A10G", "ga102"),
        ("9.0", "gh100"), ("8.0", "ga100"), ("10.0", "gb100"), ("12.0", "gb202"), ("8.9", "ad102"),
        ("8.7", "ga10b"), ("sm_87", "ga10b"),
        ("sm_90", "gh100"), ("sm_120", "gb202"), ("Intel Arc A770", None), ("3.5", None),
    ],
    ids=lambda v: str(v),
)
def test_chip_from_name(name: str, chip: str | None) -> None:
    assert chip_from_name(name) == chip


@pytest.mark.parametrize("capability", sorted(CHIP_BY_CAPABILITY), ids=lambda c: f"{c[0]}.{c[1]}")
def test_a_capability_spelled_as_text_names_the_same_chip(capability: tuple[int, int]) -> None:
    major, minor = capability
    expected = CHIP_BY_CAPABILITY[capability]
    assert chip_from_name(f"{major}.{minor}") == expected
    assert chip_from_name(f"sm_{major}{minor}") == expected
