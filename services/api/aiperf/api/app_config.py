"""Where the api's app finds its files: a module apart from the app, so that the service
builds its configuration without importing Litestar (the app is built at the first request)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class AppConfig:
    """Where the app finds its files.

    `artifact_dir` holds the exports (and `inputs.json`), `dataset_dir` the dataset files;
    `compressed_dataset` (Kubernetes) serves `<name>.zst` as-is with `Content-Encoding: zstd`;
    `upload_token` (Kubernetes: derived from the run's key Secret) opens the raw-part upload
    route, which refuses everything without it.
    """

    artifact_dir: Path
    dataset_dir: Path
    compressed_dataset: bool = False
    upload_token: str | None = None


__all__ = ["AppConfig"]
