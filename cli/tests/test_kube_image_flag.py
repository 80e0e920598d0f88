"""`--image REF` of `kube generate/profile`: one image for every container in direct mode, the
AIPerfJob's `spec.image` in operator mode; a malformed reference, or --image beside the
per-service --image-registry/--image-tag, is one line and exit 2 before any request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import yaml

from aiperf.crd.generator import build_crd
from aiperf.crd.model import JOB_KIND
from aiperf.testing.fake_kube import FakeKube

pytestmark = pytest.mark.anyio

NS = "bench"
CR_API = "aiperf.nvidia.com/v1alpha1"
IMAGE = "registry.example:5000/aiperf/all:0.2.0"
FLAGS = ("--model", "Qwen/Qwen3-0.6B", "--url", "http://vllm.llm.svc:8000", "--name", "demo", "-n", NS,
         "--total-workers", "3")
Run = Callable[..., Awaitable[Any]]


def _containers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    jobset = next(o for o in objects if o["kind"] == "JobSet")
    return [c for rj in jobset["spec"]["replicatedJobs"]
            for c in rj["template"]["spec"]["template"]["spec"]["containers"]]


async def test_direct_mode_runs_every_container_from_the_one_image(aiperf: Run) -> None:
    result = await aiperf("kube", "generate", *FLAGS, "--image", IMAGE)
    assert result.code == 0, result.err
    containers = _containers(list(yaml.safe_load_all(result.out)))
    assert len(containers) > 3 and {c["image"] for c in containers} == {IMAGE}


async def test_operator_mode_sets_spec_image(aiperf: Run, kube: FakeKube) -> None:
    printed = await aiperf("kube", "generate", *FLAGS, "--image", IMAGE, "--operator")
    assert printed.code == 0, printed.err
    assert yaml.safe_load(printed.out)["spec"]["image"] == IMAGE
    kube.install_crd(build_crd(JOB_KIND))
    submitted = await aiperf("kube", "profile", *FLAGS, "--image", IMAGE, "--detach", "--kubeconfig",
                             kube.kubeconfig_path)
    assert submitted.code == 0, submitted.err
    stored = kube.get(CR_API, JOB_KIND, NS, "demo")
    assert stored is not None and stored["spec"]["image"] == IMAGE


@pytest.mark.parametrize(("extra", "error"), [
    (("--image", "Registry/AIPerf:1"), "error: --image 'Registry/AIPerf:1': not an image reference; expected "
                                       "[REGISTRY[:PORT]/]PATH[:TAG][@DIGEST]"),
    (("--image", "aiperf all"), "error: --image 'aiperf all': not an image reference"),
    (("--image", IMAGE, "--image-tag", "0.3.0"), "error: --image names the one image of every container; "
                                                  "leave out --image-registry/--image-tag"),
    (("--image-registry", "reg.example", "--operator"), "error: --image-registry/--image-tag: an AIPerfJob names "
                                                         "one image for every container (spec.image); pass --image"),
])
async def test_a_bad_image_is_one_line_and_exit_2(aiperf: Run, kube: FakeKube, extra: tuple[str, ...],
                                                  error: str) -> None:
    for verb in (("generate",), ("profile", "--detach")):
        result = await aiperf("kube", *verb, *FLAGS, *extra, "--kubeconfig", kube.kubeconfig_path)
        assert (result.code, result.out) == (2, "")
        assert result.err.startswith(error) and result.err.count("\n") == 1
    assert kube.requests == []
