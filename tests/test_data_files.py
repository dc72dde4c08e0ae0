"""The package's TOML tables and the parsed twins ridgeline reads at run time agree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ridgeline import _files, hardware

ROOT = Path(__file__).resolve().parents[1]
TWINNED = sorted(p.stem for p in (ROOT / "src/ridgeline/data/parsed").glob("*.json"))


def test_every_table_read_at_start_has_a_twin() -> None:
    assert TWINNED == ["gpus"]


@pytest.mark.parametrize("stem", TWINNED)
def test_the_twin_is_its_toml_parsed(stem: str) -> None:
    toml = _files.loads_toml(_files.package_text(f"{stem}.toml"))
    assert _files.package_table(f"{stem}.toml") == toml


def test_the_script_finds_a_stale_twin(tmp_path: Path) -> None:
    """The check the script runs before a commit: clean now, and it fails (exit 1) on a TOML
    edited without writing its twin again."""
    script = ROOT / "scripts/parse_data.py"
    clean = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert clean.returncode == 0, clean.stdout
    data = tmp_path / "src/ridgeline/data"
    (data / "parsed").mkdir(parents=True)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts/parse_data.py").write_text(script.read_text())
    (data / "gpus.toml").write_text('[x]\nlabel = "X"\n')
    (data / "parsed/gpus.json").write_text('{"x": {"label": "Y"}}\n')
    stale = subprocess.run(
        [sys.executable, str(tmp_path / "scripts/parse_data.py"), "--check"], capture_output=True, text=True
    )
    assert stale.returncode == 1 and "differs" in stale.stdout


def test_the_catalogue_loads_without_tomllib() -> None:
    """A start that reads the built-in catalogue imports no TOML parser."""
    code = (
        "import sys; from ridgeline.hardware import get_accelerator; get_accelerator('h100-sxm');"
        "print('tomllib' in sys.modules, 'tomli' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
    assert hardware.builtin_catalogue()["h100-sxm"].bandwidth_bytes_per_s == 3.35e12  # the data sheet's
