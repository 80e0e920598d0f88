"""`probe_identity` against real HTTP servers on 127.0.0.1 that answer like llama.cpp (/props),
vLLM (/version) or neither, and against a port where nothing listens."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiperf.servermetrics.identity import probe_identity, server_root

LLAMA_PROPS = {"build_info": "b1-0c1e570", "model_path": "/models/tiny.gguf", "total_slots": 4, "n_ctx": 16384,
               "chat_template": "x" * 5000, "default_generation_settings": {"n_predict": -1}}


@contextmanager
def _server(routes: dict[str, object], server_header: str) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = routes.get(self.path)
            data = json.dumps(body).encode() if body is not None else b'{"detail": "Not Found"}'
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def version_string(self) -> str:
            return server_header

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_llama_cpp_server_is_known_by_its_props_and_header() -> None:
    models = {"object": "list", "data": [{"id": "tiny-llama", "object": "model"}]}
    with _server({"/props": LLAMA_PROPS, "/v1/models": models}, "llama.cpp") as url:
        found = probe_identity(url)
    assert found["server"] == "llama.cpp" and found["version"] == "b1-0c1e570"
    assert found["models"] == ["tiny-llama"]
    assert found["llamacpp"] == {"build_info": "b1-0c1e570", "model_path": "/models/tiny.gguf", "total_slots": 4,
                                 "n_ctx": 16384}  # the long template and defaults are left out
    assert found["probes"] == {"/props": 200, "/version": 404, "/v1/models": 200}


def test_a_vllm_server_is_known_by_its_version() -> None:
    with _server({"/version": {"version": "0.11.0"}}, "uvicorn") as url:
        found = probe_identity(url)
    assert (found["server"], found["version"], found["llamacpp"], found["models"]) == ("uvicorn", "0.11.0", None, [])


def test_nothing_listening_is_said_not_raised() -> None:
    with _server({}, "x") as url:
        dead = url  # the server is gone after the block
    found = probe_identity(dead, timeout_s=1.0)
    assert found["server"] is None and list(found["probes"]) == ["/props"]  # refused: not asked twice more
    assert "ConnectionRefusedError" in found["probes"]["/props"]


def test_the_root_of_any_url_form() -> None:
    assert server_root("http://h:8000/v1/chat/completions") == ("http", "h", 8000)
    assert server_root("h:8000") == ("http", "h", 8000)
    assert server_root("https://api.example.com/v1") == ("https", "api.example.com", 443)
