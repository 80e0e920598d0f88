"""Fixtures of the real-server tier: the llama.cpp build (or a one-line skip naming the script
that makes it), the tiny model (made once per session), and servers started per test module.
The headless browser comes from the browser tier's fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser.conftest import browser, screenshot_dir  # noqa: F401 (fixtures used here)
from real._llama import BUILD_SCRIPT, LlamaServer, llama_dir, llama_server, make_model


@pytest.fixture(scope="session")
def llama_cache() -> Path:
    found = llama_dir()
    if found is None:
        pytest.skip(f"llama-server is not built: run {BUILD_SCRIPT} (or set AIPERF_LLAMA_DIR)")
    return found


@pytest.fixture(scope="session")
def tiny_model(llama_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model(llama_cache, tmp_path_factory.mktemp("model") / "tiny.gguf")


@pytest.fixture(scope="module")
def chat_server(llama_cache: Path, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """A generating server with 8 slots (`-np 8`)."""
    with llama_server(llama_cache, tiny_model, tmp_path_factory.mktemp("logs"), slots=8) as server:
        yield server


@pytest.fixture(scope="module")
def embedding_server(llama_cache: Path, tiny_model: Path,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    with llama_server(llama_cache, tiny_model, tmp_path_factory.mktemp("logs"), slots=4, embeddings=True) as server:
        yield server
