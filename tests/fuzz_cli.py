"""Run many command lines in one process, each through the CLI's own `main()`, and
report each as a JSON line as soon as it ends: exit status, stdout, stderr and seconds.

    python tests/fuzz_cli.py CASES.json

One process runs a whole batch (a process start per case would cost more than the
cases); the caller gives the batch a deadline, and the last line it read names the
case that was running if the deadline passes."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time

MEMORY_LIMIT_BYTES = 8 << 30  # a runaway read fails fast here instead of starving the machine


def main(path: str) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    from ridgeline.cli import main as cli_main

    with open(path, encoding="utf-8") as handle:
        cases = json.load(handle)
    real_stdout = sys.stdout
    for i, argv in enumerate(cases):
        real_stdout.write(json.dumps({"start": i}) + "\n")
        real_stdout.flush()
        out, err = io.StringIO(), io.StringIO()
        began = time.perf_counter()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code: object = cli_main(argv)
            except SystemExit as exc:  # main() returns; an escape is reported as such
                code = f"SystemExit({exc.code!r})"
            except BaseException as exc:  # anything escaping main() is the finding
                code = f"escaped {type(exc).__name__}: {exc}"
        seconds = time.perf_counter() - began
        real_stdout.write(
            json.dumps(
                {"case": i, "code": code, "stdout": out.getvalue(), "stderr": err.getvalue(), "s": seconds}
            )
            + "\n"
        )
        real_stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
