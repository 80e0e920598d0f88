"""`aiperf profile` and `aiperf kube generate/profile` build ProfileOptions with one function."""

from __future__ import annotations

import pytest

from aiperf.cli.main import main
from aiperf.cli.profile_args import FlagError
from aiperf.cli.profile_options import ProfileFlags, build_profile_options


def test_flags_become_profile_options_with_secrets_apart() -> None:
    built = build_profile_options(ProfileFlags(
        model="m", url="vllm:8000/", concurrency=4, osl=64, goodput="request_latency:250",
        extra_inputs=["temperature:0.5"], header=["X-B: 2", "X-A:1"], api_key="sk-x"), ui="none")
    options = built.options
    assert options.url == "http://vllm:8000"
    assert options.dataset == {"isl": 550, "isl_stddev": 0.0, "osl": 64, "osl_stddev": 0.0,
                               "num_dataset_entries": 100}
    assert (options.goodput, options.extra_inputs) == ({"request_latency": 250.0}, {"temperature": 0.5})
    assert options.header_names == ["X-A", "X-B"] and options.ui == "none"
    assert built.headers == {"X-B": "2", "X-A": "1"} and built.api_key == "sk-x"


def test_malformed_values_raise_flag_errors_in_flag_order() -> None:
    with pytest.raises(FlagError, match=r"^--goodput 'x'"):
        build_profile_options(ProfileFlags(model="m", goodput="x", header=["bad"]))
    with pytest.raises(FlagError, match=r"^--header 'bad': expected NAME:VALUE$"):
        build_profile_options(ProfileFlags(model="m", header=["bad"]))


def test_profile_command_still_rejects_bad_flags_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "-m", "m", "--goodput", "oops"]) == 2
    assert capsys.readouterr().err == ("error: --goodput 'oops': expected METRIC:VALUE, e.g. "
                                       "request_latency:250\n")
    assert main(["profile", "-m", "m", "--concurrency", "0", "--url", "127.0.0.1:9"]) == 2
    assert capsys.readouterr().err == "error: --concurrency 0: must be at least 1\n"
