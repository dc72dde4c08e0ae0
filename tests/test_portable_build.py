"""The llama.cpp server the tests drive is built for any x86-64 CPU of the last decade.

A native build on a CPU that reports AMX emits `tilezero`; in a VM that hides AMX, the
server's first request dies of SIGILL. scripts/llama_wheel.sh pins the CPU features
instead; this reads the installed libraries' machine code and checks that they hold no
instruction beyond AVX2: no AMX tile instruction and no AVX-512 register (zmm) or mask."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

BEYOND_AVX2 = re.compile(r"\b(tile(zero|loadd|stored|release|cfg)|ldtilecfg|sttilecfg)\b|%zmm\d|\{%k[1-7]\}")


def llama_libraries() -> list[Path]:
    import llama_cpp

    return sorted((Path(llama_cpp.__file__).parent / "lib").glob("*.so*"))


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the pinned features are x86-64's")
def test_llama_cpp_libraries_hold_no_avx512_or_amx_instruction() -> None:
    objdump = shutil.which("objdump")
    assert objdump, "binutils' objdump is needed to read the libraries"
    libs = llama_libraries()
    assert any("ggml-cpu" in p.name for p in libs), libs
    for lib in libs:
        code = subprocess.run([objdump, "-d", str(lib)], capture_output=True, text=True, check=True).stdout
        found = BEYOND_AVX2.search(code)
        assert found is None, (
            f"{lib.name} holds {found.group(0) if found else ''}: rebuild with scripts/llama_wheel.sh"
        )
        if "ggml-cpu" in lib.name:  # and it is not a scalar build either: AVX2 is there
            assert "%ymm" in code
