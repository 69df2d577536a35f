"""Image tier: how qemu_boot.run reports runs that do not end well.

guest watchdog fired        -> "timeout" (the init still hands back)
guest never hands back      -> "crash"   (here: init= points nowhere, panic)
host timeout killed QEMU    -> "timeout"
"""

from __future__ import annotations

from pathlib import Path

import pytest
import qemu_boot
from checks import TOPO

pytestmark = pytest.mark.qemu
HANG = {"run_id": "hang", "programs": [{"name": "sleeper", "cmd": ["sleep", "600"]}]}


def test_guest_watchdog_is_a_timeout_with_results(
    kernel: Path, image: Path, tmp_path: Path
) -> None:
    res = qemu_boot.run(kernel, image, HANG, tmp_path, TOPO, 600, {"watchdog_s": 5})
    assert res.status == "timeout", f"{res.error}\n{res.log_tail}"
    assert res.guest_status is not None and res.guest_status["watchdog_fired"] is True
    assert res.exit_code is None and "watchdog" in (res.error or "")
    assert (tmp_path / "results.jsonl").is_file() and (tmp_path / "init.log").is_file()
    assert res.qemu_returncode == 0  # the guest powered off by itself


def test_no_hand_back_is_a_crash(kernel: Path, image: Path, tmp_path: Path) -> None:
    res = qemu_boot.run(kernel, image, HANG, tmp_path, TOPO, 600,
                        extra_append="init=/nonexistent")  # fmt: skip
    assert res.status == "crash", f"{res.error}\n{res.log_tail}"
    assert "handed back no results" in (res.error or "")
    assert "Kernel panic" in (res.error or "")
    assert res.files == [] and (tmp_path / "console.log").is_file()


def test_host_timeout_kills_qemu(kernel: Path, image: Path, tmp_path: Path) -> None:
    res = qemu_boot.run(kernel, image, HANG, tmp_path, TOPO, timeout=3)
    assert res.status == "timeout" and res.qemu_returncode is None
    assert (res.error or "").startswith("host timeout after 3 s")
    assert res.seconds < 60
