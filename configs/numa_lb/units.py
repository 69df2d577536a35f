"""Parsing of human-written sizes, frequencies and latencies.

Sizes follow gem5's convention: binary multiples whether written IEC-style
("512MiB") or gem5-style ("512MB"), because every size in this project is a
memory or cache capacity and gem5 itself reads "MB" as 2**20 bytes.
"""

from __future__ import annotations

import re

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kib": KiB,
    "kb": KiB,
    "k": KiB,
    "mib": MiB,
    "mb": MiB,
    "m": MiB,
    "gib": GiB,
    "gb": GiB,
    "g": GiB,
    "tib": 1 << 40,
    "tb": 1 << 40,
}

_FREQ_UNITS = {"hz": 1, "khz": 10**3, "mhz": 10**6, "ghz": 10**9}

_NUMBER = r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*"


def parse_size(text: str | int, what: str = "size") -> int:
    """Return a byte count for "512MiB", "1GB", "65536" or an int.

    Fractional results are rejected rather than rounded: a capacity that is not a
    whole number of bytes is always a typo.
    """
    if isinstance(text, bool):
        raise ValueError(f"{what}: expected a size such as '512MiB', got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        match = re.fullmatch(_NUMBER, text)
        if not match or match.group(2).lower() not in _SIZE_UNITS:
            raise ValueError(
                f"{what}: cannot parse {text!r}; expected a number with one of the units "
                "B, KiB, MiB, GiB, TiB (kB/MB/GB are read as binary, like gem5)"
            )
        scaled = float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
        if scaled != int(scaled):
            raise ValueError(f"{what}: {text!r} is not a whole number of bytes")
        value = int(scaled)
    if value <= 0:
        raise ValueError(f"{what}: must be positive, got {text!r}")
    return value


def parse_frequency(text: str | int | float, what: str = "frequency") -> int:
    """Return Hz for "2.8GHz", "800MHz" or a number of Hz."""
    if isinstance(text, bool):
        raise ValueError(f"{what}: expected a frequency such as '2.8GHz', got {text!r}")
    if isinstance(text, int | float):
        value = float(text)
    else:
        match = re.fullmatch(_NUMBER, text)
        if not match or match.group(2).lower() not in _FREQ_UNITS:
            raise ValueError(
                f"{what}: cannot parse {text!r}; expected a number with a unit Hz, kHz, MHz or GHz"
            )
        value = float(match.group(1)) * _FREQ_UNITS[match.group(2).lower()]
    if value <= 0 or value != int(value):
        raise ValueError(f"{what}: must be a positive whole number of Hz, got {text!r}")
    return int(value)


def parse_latency_ns(text: str | int | float, what: str = "latency") -> float:
    """Return nanoseconds for "20ns", "0.02us" or a number of ns."""
    if isinstance(text, bool):
        raise ValueError(f"{what}: expected a latency such as '20ns', got {text!r}")
    if isinstance(text, int | float):
        value = float(text)
    else:
        units = {"ns": 1.0, "us": 1e3, "ps": 1e-3}
        match = re.fullmatch(_NUMBER, text)
        if not match or match.group(2).lower() not in units:
            raise ValueError(f"{what}: cannot parse {text!r}; expected e.g. '20ns'")
        value = float(match.group(1)) * units[match.group(2).lower()]
    if value < 0:
        raise ValueError(f"{what}: must not be negative, got {text!r}")
    return value


def format_size(nbytes: int) -> str:
    """Shortest exact IEC spelling, e.g. 536870912 -> '512MiB' (gem5 reads it too)."""
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B"
