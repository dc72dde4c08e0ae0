"""Run the web app on uvicorn: check the address first, print the URL, optionally open it."""

from __future__ import annotations

import socket
import sys
import threading
import webbrowser

from ridgeline.errors import RidgelineError
from ridgeline.web.hosts import allowed_hosts, is_loopback


def url_for(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    shown = f"[{shown}]" if ":" in shown else shown
    return f"http://{shown}:{port}/"


def check_address(host: str, port: int) -> None:
    """Fail with one line, before uvicorn starts, when the address cannot be bound."""
    if not 0 < port < 65536:
        raise RidgelineError(f"--port must lie in 1..65535, got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise RidgelineError(f"--host '{host}' is not an address of this machine; try 127.0.0.1") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise RidgelineError(
                f"cannot listen on {host}:{port} ({exc.strerror}): choose another --port"
            ) from None


def serve(host: str = "127.0.0.1", port: int = 8000, open_browser: bool = False) -> None:
    import uvicorn

    from ridgeline.web.app import create_app

    check_address(host, port)
    url = url_for(host, port)
    print(f"ridgeline web: the lesson is at {url}  (Ctrl+C stops it)", flush=True)
    if not is_loopback(host):
        print(f"ridgeline web: listening on {host}, so other machines can reach it", file=sys.stderr)
    if open_browser:
        threading.Timer(1.0, webbrowser.open, args=(url,)).start()
    app = create_app(allowed_hosts=allowed_hosts(host, port))
    uvicorn.run(app, host=host, port=port, log_level="warning")
