"""The dataset-manager builds the files, inputs.json and announces DatasetConfigured."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from aiperf.config import Benchmark, DatasetFormat, Endpoint, FileDataset, Length, Prompts, SyntheticDataset
from aiperf.dataset import DatasetReader
from aiperf.dataset_manager.service import DatasetManager
from aiperf.endpoints import PayloadBuilder
from aiperf.messages import BuildDataset, DatasetBuilt, DatasetConfigured, Event, ProfileStart
from aiperf.runtime import UnknownCommand, UserError

pytestmark = pytest.mark.anyio


class Events:
    def __init__(self) -> None:
        self.seen: list[Event] = []

    async def publish(self, event: Event) -> None:
        self.seen.append(event)


def manager(tmp_path: Path, benchmark: Benchmark, compress: bool = False) -> tuple[DatasetManager, Events]:
    events = Events()
    return DatasetManager(dataset=benchmark.dataset, seed=benchmark.dataset_seed,
                          tokenizer=benchmark.tokenizer.name,
                          payload=PayloadBuilder.of(benchmark.endpoint, benchmark.model),
                          dataset_dir=tmp_path / "dataset", inputs_path=tmp_path / "inputs.json",
                          compress=compress, events=events), events


async def test_builds_dataset_and_inputs(tmp_path: Path) -> None:
    benchmark = Benchmark(models=["m"], endpoint=Endpoint(streaming=True), random_seed=5, datasets=[
        SyntheticDataset(entries=7, prompts=Prompts(isl=Length(mean=16), osl=Length(mean=8)))])
    dm, events = manager(tmp_path, benchmark, compress=True)
    async with anyio.create_task_group() as tg:
        await tg.start(dm.run)
        result = await dm.handle(BuildDataset(request_id="c"))
        tg.cancel_scope.cancel()
    assert result == DatasetBuilt(dataset_dir=str(tmp_path / "dataset"), conversations=7)
    with DatasetReader(tmp_path / "dataset") as reader:
        assert len(reader) == 7
    assert (tmp_path / "dataset" / "dataset.dat.zst").exists()
    inputs = json.loads((tmp_path / "inputs.json").read_text())
    first = inputs["data"][0]["payloads"][0]
    assert first["model"] == "m" and first["stream"] is True and first["max_completion_tokens"] == 8
    assert events.seen == [DatasetConfigured(conversations=7, path=str(tmp_path / "dataset"), compressed=True)]


async def test_malformed_line_is_a_user_error_naming_it(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a"}\nnot json\n')
    benchmark = Benchmark(models=["m"], datasets=[FileDataset(path=str(data), format=DatasetFormat.SINGLE_TURN)])
    dm, _ = manager(tmp_path, benchmark)
    with pytest.raises(UserError, match="d.jsonl:2"):
        await dm.handle(BuildDataset(request_id="c"))


async def test_other_commands_are_refused(tmp_path: Path) -> None:
    dm, _ = manager(tmp_path, Benchmark(models=["m"]))
    with pytest.raises(UnknownCommand, match="does not handle"):
        await dm.handle(ProfileStart(request_id="s"))
