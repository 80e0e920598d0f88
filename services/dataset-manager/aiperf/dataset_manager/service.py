"""The dataset-manager: builds the run's dataset once, writes the memory-mapped files (and
their `.zst` copies for Kubernetes) and `inputs.json`, then announces `DatasetConfigured`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import anyio
import orjson
import structlog
from anyio.abc import TaskStatus

from aiperf.config import ProfileOptions
from aiperf.dataset import (
    DatasetError,
    DatasetOptions,
    Turn,
    build_conversations,
    write_dataset,
    write_inputs_json,
)
from aiperf.endpoints import EndpointType, PayloadBuilder
from aiperf.messages import Command, DatasetConfigured, Event, ProfileConfigure
from aiperf.runtime import UserError
from aiperf.tokenizer import TokenizerError, load_tokenizer

log = structlog.get_logger("aiperf.dataset_manager")


class EventSink(Protocol):
    async def publish(self, event: Event) -> None: ...


def dataset_options(profile: ProfileOptions) -> DatasetOptions:
    """The dataset flags of `profile`; raises `UserError` naming a bad flag."""
    try:
        return DatasetOptions(**{**profile.dataset, "random_seed": profile.random_seed})
    except DatasetError as exc:
        raise UserError(str(exc)) from exc
    except TypeError as exc:
        raise UserError(f"invalid dataset option: {exc}") from exc


def _warm_tokenizer(spec: str | None) -> None:
    """Load (and cache) the tokenizer; a failure is reported later, by `_build`."""
    try:
        load_tokenizer(spec)
    except TokenizerError:
        pass


class DatasetManager:
    """Builds the dataset on `ProfileConfigure` (in a worker thread: it is CPU-bound)."""

    def __init__(self, *, profile: ProfileOptions | None, dataset_dir: Path, inputs_path: Path,
                 compress: bool, events: EventSink | None) -> None:
        self._profile, self._dir, self._inputs = profile, dataset_dir, inputs_path
        self._compress, self._events = compress, events
        self._warm = anyio.Event()
        self._warming = False

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Ready at once; warms the tokenizer cache while the other services start, then
        waits for `ProfileConfigure` until cancelled."""
        task_status.started()
        self._warming = True
        try:
            if self._profile is not None:
                await anyio.to_thread.run_sync(_warm_tokenizer, self._profile.tokenizer)
        finally:
            self._warm.set()
        await anyio.sleep_forever()

    async def handle(self, command: Command) -> dict[str, Any]:
        """`ProfileConfigure`: build and write; replies `{"dataset_dir", "conversations"}`."""
        if not isinstance(command, ProfileConfigure):
            raise ValueError(f"dataset-manager does not handle {type(command).__name__}")
        if self._profile is None:
            raise UserError("no profile options in run_config.json")
        if self._warming:  # the warm-up loads the same tokenizer: never load it twice
            await self._warm.wait()
        result = await anyio.to_thread.run_sync(self._build, self._profile)
        if self._events is not None:
            await self._events.publish(DatasetConfigured(conversations=result["conversations"],
                                                         path=result["dataset_dir"],
                                                         compressed=self._compress))
        return result

    def _build(self, profile: ProfileOptions) -> dict[str, Any]:
        options = dataset_options(profile)
        try:
            tokenizer = load_tokenizer(profile.tokenizer)
            conversations = build_conversations(options, tokenizer)
        except (TokenizerError, DatasetError) as exc:
            raise UserError(str(exc)) from exc
        files = write_dataset(self._dir, conversations, compress=self._compress)
        builder = PayloadBuilder(endpoint_type=EndpointType(profile.endpoint_type), model=profile.model,
                                 streaming=profile.streaming, extra_inputs=profile.extra_inputs,
                                 use_legacy_max_tokens=profile.use_legacy_max_tokens)

        def payload_of(turn: Turn) -> dict[str, Any]:
            parsed: dict[str, Any] = orjson.loads(builder.build(turn.text, max_tokens=turn.max_tokens))
            return parsed

        write_inputs_json(self._inputs, conversations, payload_of)
        log.info("dataset.configured", conversations=files.count, bytes=files.data_bytes,
                 tokenizer=tokenizer.name)
        return {"dataset_dir": str(self._dir), "conversations": files.count}
