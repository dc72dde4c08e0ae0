"""Write the package's TOML tables as parsed JSON into src/ridgeline/data/parsed/, which is
what ridgeline reads at run time (the TOML stays the file to edit: run this after editing
it; tests/test_data_files.py fails while the two differ).

    python scripts/parse_data.py           # write every twin
    python scripts/parse_data.py --check   # exit 1 when a twin differs from its TOML
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ridgeline._files import loads_toml  # noqa: E402

DATA = ROOT / "src" / "ridgeline" / "data"
TABLES = ("gpus.toml",)  # the tables read on every start


def twin(name: str) -> tuple[Path, str]:
    """The twin's path and the text it should hold."""
    parsed = loads_toml((DATA / name).read_text(encoding="utf-8"))
    text = json.dumps(parsed, indent=1, allow_nan=False) + "\n"
    return DATA / "parsed" / f"{name.removesuffix('.toml')}.json", text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare, write nothing")
    args = ap.parse_args()
    stale = []
    for name in TABLES:
        path, text = twin(name)
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{'differs' if args.check else 'wrote'}: {path.relative_to(ROOT)}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
