"""The small languages of the `aiperf kube` flags: every accepted form, and one-line errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiperf.cli.kube_flags import (
    FlagError,
    expand_dotted_flags,
    parse_list,
    parse_mapping,
    parse_resources,
    parse_tolerations,
)


def one_line(exc: pytest.ExceptionInfo[FlagError]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


# -- dotted flags --------------------------------------------------------------------------------

def test_dotted_flags_become_key_value_tokens() -> None:
    argv = ["kube", "generate", "--labels.team", "perf", "--env-from-secrets.OPENAI_API_KEY=llm/key",
            "--node-selector.nvidia.com/gpu.present", "true", "--model", "m.x", "--labels", "a=b"]
    assert expand_dotted_flags(argv) == [
        "kube", "generate", "--labels", "team=perf", "--env-from-secrets", "OPENAI_API_KEY=llm/key",
        "--node-selector", "nvidia.com/gpu.present=true", "--model", "m.x", "--labels", "a=b"]


def test_dotted_flags_leave_other_flags_and_everything_after_double_dash() -> None:
    argv = ["--url", "http://a.b", "--label.x", "1", "--", "--labels.team", "perf"]
    assert expand_dotted_flags(argv) == argv


def test_dotted_flag_errors_are_one_line() -> None:
    with pytest.raises(FlagError) as exc:
        expand_dotted_flags(["--labels.", "x"])
    assert one_line(exc).startswith("--labels.: the key after '--labels.' is empty; use --labels.KEY VALUE")
    with pytest.raises(FlagError) as exc:
        expand_dotted_flags(["--annotations.owner"])
    assert one_line(exc) == ("--annotations.owner: needs a value; use --annotations.KEY VALUE, "
                             "--annotations KEY=VALUE or --annotations '{\"KEY\": \"VALUE\"}'")


# -- mappings ------------------------------------------------------------------------------------

def test_mapping_forms_are_equivalent_and_mix() -> None:
    expected = {"team": "perf", "tier": "gold"}
    assert parse_mapping("--labels", ["team=perf", "tier=gold"]) == expected
    assert parse_mapping("--labels", ['{"team": "perf", "tier": "gold"}']) == expected
    assert parse_mapping("--labels", ['{"team": "perf"}', "tier=gold"]) == expected
    assert parse_mapping("--labels", None) == {}


def test_mapping_values_keep_equals_signs_and_later_items_win() -> None:
    assert parse_mapping("--env-vars", ["A=x=y", "A=z", "B="]) == {"A": "z", "B": ""}
    assert parse_mapping("--labels", ['{"n": 3, "on": true, "f": 1.5}']) == {
        "n": "3", "on": "true", "f": "1.5"}


@pytest.mark.parametrize(("item", "message"), [
    ("team", "--labels 'team': expected KEY=VALUE; use --labels.KEY VALUE, --labels KEY=VALUE or "
             "--labels '{\"KEY\": \"VALUE\"}'"),
    ("=perf", "--labels '=perf': expected KEY=VALUE; use --labels.KEY VALUE"),
    ("{team: perf}", "--labels '{team: perf}': invalid JSON (Expecting property name enclosed in double "
                     "quotes); use --labels.KEY VALUE"),
    ('{"a": {"b": 1}}', "--labels a: the value must be a string, number or boolean, not dict"),
    ('{"a": null}', "--labels a: the value must be a string, number or boolean, not null"),
    ('{"": "x"}', "--labels '{\"\": \"x\"}': a key is empty"),
])
def test_mapping_errors_name_the_flag_and_the_forms(item: str, message: str) -> None:
    with pytest.raises(FlagError) as exc:
        parse_mapping("--labels", [item])
    assert one_line(exc).startswith(message)


keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-/]{0,20}", fullmatch=True)
values = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@given(st.dictionaries(keys, values, max_size=5))
def test_key_value_json_and_dotted_agree(mapping: dict[str, str]) -> None:
    as_pairs = [f"{k}={v}" for k, v in mapping.items()]
    dotted = [t for k, v in mapping.items() for t in (f"--labels.{k}", v)]
    expanded = expand_dotted_flags(dotted)
    assert expanded[::2] == ["--labels"] * len(mapping)
    assert (parse_mapping("--labels", as_pairs) == parse_mapping("--labels", [json.dumps(mapping)])
            == parse_mapping("--labels", expanded[1::2]) == mapping)


# -- lists, tolerations, resources ---------------------------------------------------------------

def test_lists_take_repeats_commas_and_json() -> None:
    assert parse_list("--image-pull-secrets", ["a,b", "c", '["d", "a"]', ""]) == ["a", "b", "c", "d"]
    with pytest.raises(FlagError) as exc:
        parse_list("--image-pull-secrets", ["[1]"])
    assert one_line(exc) == "--image-pull-secrets '[1]': a JSON value must be a list of strings"


def test_tolerations_short_forms() -> None:
    assert parse_tolerations(["nvidia.com/gpu=present:NoSchedule", "dedicated:NoExecute", "spot",
                              "zone=a"]) == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"},
        {"key": "spot", "operator": "Exists"},
        {"key": "zone", "operator": "Equal", "value": "a"}]


def test_tolerations_json_object_and_list() -> None:
    one = {"key": "nvidia.com/gpu", "operator": "Exists"}
    two = {"operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}
    assert parse_tolerations([json.dumps(one), json.dumps([two])]) == [one, two]


@pytest.mark.parametrize(("item", "message"), [
    ("a=b:Sometimes", "--tolerations 'a=b:Sometimes': effect must be one of NoSchedule, PreferNoSchedule, "
                      "NoExecute"),
    ("=b:NoSchedule", "--tolerations '=b:NoSchedule': expected KEY=VALUE:EFFECT, KEY:EFFECT, KEY or a JSON "
                      "object, e.g. nvidia.com/gpu=present:NoSchedule"),
    ("a=:NoSchedule", "--tolerations 'a=:NoSchedule': expected KEY=VALUE:EFFECT"),
    ('{"key": "a", "operator": "In"}',
     "--tolerations '{\"key\": \"a\", \"operator\": \"In\"}': operator must be Equal or Exists"),
    ('{"key": "a", "colour": "red"}', "--tolerations '{\"key\": \"a\", \"colour\": \"red\"}': unknown field "
                                      "'colour'"),
    ('[{"value": "x"}]', "--tolerations '[{\"value\": \"x\"}]': a toleration without a key needs operator "
                         "Exists"),
    ('["a"]', "--tolerations '[\"a\"]': each toleration must be a JSON object"),
    ('{"key": "a", "tolerationSeconds": "1"}',
     "--tolerations '{\"key\": \"a\", \"tolerationSeconds\": \"1\"}': tolerationSeconds must be an integer"),
    ("[oops", "--tolerations '[oops': invalid JSON"),
])
def test_toleration_errors(item: str, message: str) -> None:
    with pytest.raises(FlagError) as exc:
        parse_tolerations([item])
    assert one_line(exc).startswith(message)


def test_resources() -> None:
    text = '{"worker": {"requests": {"cpu": 1, "memory": "1Gi"}, "limits": {"memory": "1Gi"}}}'
    assert parse_resources(text) == {"worker": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                "limits": {"memory": "1Gi"}}}
    assert parse_resources(None) == {}
    for bad, message in (("nope", "--resources: invalid JSON"),
                         ("[]", "--resources: expected a JSON object"),
                         ('{"worker": {"cpu": "1"}}', "--resources worker: expected an object with requests"),
                         ('{"worker": {"limits": "1"}}', "--resources worker.limits: expected an object")):
        with pytest.raises(FlagError) as exc:
            parse_resources(bad)
        assert one_line(exc).startswith(message)


def test_deploy_flag_defaults_are_the_settings_defaults() -> None:
    import dataclasses

    import msgspec

    from aiperf.cli.kube_options import KubeDeployFlags
    from aiperf.kube import KubeSettings

    settings = {f.name: f.default for f in msgspec.structs.fields(KubeSettings)}
    shared = [f for f in dataclasses.fields(KubeDeployFlags) if f.name in settings and f.name != "name"]
    assert len(shared) >= 8
    for field in shared:
        default = settings[field.name]
        if field.default is None or default in ({}, []):  # mapping flags: unset means empty
            continue
        assert field.default == default, field.name
