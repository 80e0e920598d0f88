"""`KubeSettings.image`: one image reference for every container (an AIPerfJob's `spec.image`),
or per-service images from the registry and tag."""

from __future__ import annotations

import msgspec
import pytest

from aiperf.config import RunConfig
from aiperf.kube import KubeConfigError, KubeSettings, build_jobset
from aiperf.kube.names import is_image_reference


def _images(settings: KubeSettings, run_config: RunConfig) -> set[str]:
    jobset = build_jobset(settings, run_config)
    return {c["image"] for rj in jobset["spec"]["replicatedJobs"]
            for c in rj["template"]["spec"]["template"]["spec"]["containers"]}


def test_one_image_for_every_container(typical: tuple[KubeSettings, RunConfig]) -> None:
    settings, run_config = typical
    assert all(i.startswith("registry.example.com/aiperf/") and i.endswith(":0.1.0")
               for i in _images(settings, run_config))
    one = msgspec.structs.replace(settings, image="registry.example.com/aiperf/all:0.2.0")
    assert _images(one, run_config) == {"registry.example.com/aiperf/all:0.2.0"}


@pytest.mark.parametrize("good", [
    "aiperf:latest", "ubuntu", "myregistry.io/aiperf:latest", "registry.example:5000/aiperf/all:0.1.0",
    "localhost/aiperf/api", "[::1]:5000/aiperf/all:v1", "nvcr.io/nvidia/ai-dynamo/aiperf:0.13.0",
    "aiperf/all@sha256:" + "0" * 64, "reg.example/a__b/c-d.e:1.0_rc-2@sha256:" + "f" * 64])
def test_image_references_the_runtimes_accept(good: str) -> None:
    assert is_image_reference(good)
    assert KubeSettings(name="run", image=good).image == good


@pytest.mark.parametrize("bad", [
    "", "two words:1", "Aiperf", "reg.example/AIPerf/all", "aiperf:", "aiperf::1", "/aiperf", "aiperf/",
    "reg.example/aiperf:-x", "aiperf@sha256:abc", "a--/b", "x" * 256, "aiperf:" + "t" * 129])
def test_malformed_image_references(bad: str) -> None:
    assert not is_image_reference(bad)


@pytest.mark.parametrize("bad", ["", "two words:1", "Aiperf:1"])
def test_a_malformed_image_is_one_line(bad: str) -> None:
    with pytest.raises(KubeConfigError) as exc:
        KubeSettings(name="run", image=bad)
    assert str(exc.value).startswith(f"image {bad!r}:") and "\n" not in str(exc.value)
