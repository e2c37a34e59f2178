"""The local HTTP stub servers of the remote-client tests (tests/test_remote.py,
tests/test_llm.py): a threading server on 127.0.0.1 that ignores clients hanging up, served for
the length of a ``with`` block, and the writing of one JSON reply."""

from __future__ import annotations

import contextlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Optional


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:  # a client that hung up: not the test's concern
        pass


def send_json(handler: BaseHTTPRequestHandler, status: int, headers: dict, payload: bytes) -> None:
    """Writes one reply (``Content-Type: application/json``, its length, ``headers``); a client
    that timed out and closed the connection meanwhile is ignored."""
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(payload)
    except OSError:
        pass


@contextlib.contextmanager
def served(state: Any, handler: type, on_stop: Optional[Callable[[], None]] = None) -> Iterator[Any]:
    """``state`` while ``handler`` serves on 127.0.0.1 (a port of its own): ``state.url`` is set
    to its ``http://127.0.0.1:PORT/v1``; ``on_stop`` runs before the server shuts down."""
    server = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        if on_stop is not None:
            on_stop()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
