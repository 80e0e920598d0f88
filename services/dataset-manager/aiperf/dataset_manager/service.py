"""The dataset-manager: builds the run's dataset once, writes the memory-mapped files (and
their `.zst` copies for Kubernetes) and `inputs.json`, then announces `DatasetConfigured`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import anyio
import orjson
import structlog
from anyio.abc import TaskStatus

from aiperf.config import Dataset, ModelSelection
from aiperf.dataset import (
    DatasetError,
    Turn,
    assign_models,
    build_conversations,
    write_dataset,
    write_inputs_json,
)
from aiperf.endpoints import PayloadBuilder
from aiperf.messages import BuildDataset, Command, DatasetBuilt, DatasetConfigured, Event, Reply
from aiperf.runtime import UnknownCommand, UserError
from aiperf.tokenizer import TokenizerError, load_tokenizer

log = structlog.get_logger("aiperf.dataset_manager")


class EventSink(Protocol):
    async def publish(self, event: Event) -> None: ...


def _warm_tokenizer(spec: str | None) -> None:
    """Load (and cache) the tokenizer; a failure is reported later, by `_build`."""
    try:
        load_tokenizer(spec)
    except TokenizerError:
        pass


class DatasetManager:
    """Builds `dataset` (seeded by `seed`, tokens counted with `tokenizer`: a tokenizer.json path,
    None for the bundled one) on `BuildDataset`, in a worker thread: it is CPU-bound. `payload`
    formats each turn's request body for `inputs.json`. With several `models`, each turn is
    given its model per `selection` (random draws seeded by `model_seed`, the benchmark's random
    seed: AIPerf's derivation), stored in the dataset and sent in its payload."""

    def __init__(self, *, dataset: Dataset, seed: int | None, tokenizer: str | None,
                 payload: PayloadBuilder, dataset_dir: Path, inputs_path: Path, compress: bool,
                 events: EventSink | None, models: tuple[str, ...] = (),
                 selection: ModelSelection | None = None, model_seed: int | None = None) -> None:
        self._dataset, self._seed, self._tokenizer, self._payload = dataset, seed, tokenizer, payload
        self._models, self._selection, self._model_seed = models, selection or ModelSelection(), model_seed
        self._dir, self._inputs = dataset_dir, inputs_path
        self._compress, self._events = compress, events
        self._warm = anyio.Event()
        self._warming = False

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Ready at once; warms the tokenizer cache while the other services start, then
        waits for `ProfileConfigure` until cancelled."""
        task_status.started()
        self._warming = True
        try:
            await anyio.to_thread.run_sync(_warm_tokenizer, self._tokenizer)
        finally:
            self._warm.set()
        await anyio.sleep_forever()

    async def handle(self, command: Command[Any]) -> Reply | None:
        """`BuildDataset`: build and write the files. Raises `UserError` for a bad tokenizer or
        dataset file, `UnknownCommand` for any other command."""
        if not isinstance(command, BuildDataset):
            raise UnknownCommand(f"the dataset-manager does not handle {type(command).__name__}")
        if self._warming:  # the warm-up loads the same tokenizer: never load it twice
            await self._warm.wait()
        built = await anyio.to_thread.run_sync(self._build)
        if self._events is not None:
            await self._events.publish(DatasetConfigured(conversations=built.conversations,
                                                         path=built.dataset_dir, compressed=self._compress))
        return built

    def _build(self) -> DatasetBuilt:
        try:
            tokenizer = load_tokenizer(self._tokenizer)
            conversations = build_conversations(self._dataset, tokenizer, seed=self._seed)
            conversations = assign_models(conversations, self._models, strategy=self._selection.strategy,
                                          weights=self._selection.weights, seed=self._model_seed)
        except (TokenizerError, DatasetError) as exc:
            raise UserError(str(exc)) from exc
        files = write_dataset(self._dir, conversations, compress=self._compress)
        default = self._payload
        builders = {m: default.for_model(m) for m in self._models}

        def payload_of(turn: Turn) -> dict[str, Any]:
            builder = builders.get(turn.model, default) if turn.model else default
            parsed: dict[str, Any] = orjson.loads(builder.build(turn.text, max_tokens=turn.max_tokens, texts=turn.texts,
                                                               images=turn.images, audios=turn.audios))
            return parsed

        write_inputs_json(self._inputs, conversations, payload_of)
        log.info("dataset.configured", conversations=files.count, bytes=files.data_bytes,
                 tokenizer=tokenizer.name)
        return DatasetBuilt(dataset_dir=str(self._dir), conversations=files.count)
