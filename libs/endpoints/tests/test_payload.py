"""PayloadBuilder: field names and merge rules as AIPerf 0.13 sends them."""

from __future__ import annotations

import orjson
import pytest

from aiperf.endpoints import EndpointType, PayloadBuilder, path_of
from aiperf.endpoints.payload import LONG_PROMPT


def _build(**kw: object) -> dict:
    args = {"endpoint_type": EndpointType.CHAT, "model": "m", "streaming": False}
    args.update(kw)
    prompt = args.pop("prompt", "hi")
    max_tokens = args.pop("max_tokens", None)
    history = args.pop("history", None)
    builder = PayloadBuilder(**args)  # type: ignore[arg-type]
    body = builder.build(prompt, max_tokens=max_tokens, history=history)  # type: ignore[arg-type]
    assert isinstance(body, bytes)
    return orjson.loads(body)


def test_paths() -> None:
    assert path_of(EndpointType.CHAT) == "/v1/chat/completions"
    assert path_of(EndpointType.COMPLETIONS) == "/v1/completions"
    assert path_of(EndpointType("embeddings")) == "/v1/embeddings"


def test_chat_non_streaming_defaults() -> None:
    assert _build(max_tokens=50) == {
        "messages": [{"role": "user", "content": "hi"}], "model": "m", "stream": False,
        "max_completion_tokens": 50,
    }


def test_chat_streaming_history_and_no_limit() -> None:
    history = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    body = _build(streaming=True, history=history, prompt="c")
    assert body == {
        "messages": [*history, {"role": "user", "content": "c"}], "model": "m", "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_chat_legacy_max_tokens() -> None:
    body = _build(max_tokens=7, use_legacy_max_tokens=True)
    assert body["max_tokens"] == 7 and "max_completion_tokens" not in body


def test_completions() -> None:
    body = _build(endpoint_type=EndpointType.COMPLETIONS, streaming=True, max_tokens=3, prompt="p\u00e9")
    assert body == {"prompt": ["p\u00e9"], "model": "m", "stream": True, "max_tokens": 3,
                    "stream_options": {"include_usage": True}}


def test_embeddings_ignore_stream_and_limit() -> None:
    body = _build(endpoint_type=EndpointType.EMBEDDINGS, streaming=True, max_tokens=3, prompt="x")
    assert body == {"input": ["x"], "model": "m"}


def test_extra_inputs_override_everything() -> None:
    body = _build(streaming=True, max_tokens=5,
                  extra_inputs={"model": "other", "max_completion_tokens": 9, "ignore_eos": True,
                                "temperature": 0.0})
    assert body["model"] == "other"
    assert body["max_completion_tokens"] == 9
    assert body["ignore_eos"] is True and body["temperature"] == 0.0


def test_extra_inputs_turning_streaming_off_drops_stream_options() -> None:
    body = _build(streaming=True, extra_inputs={"stream": False})
    assert body["stream"] is False and "stream_options" not in body


def test_extra_inputs_stream_options_replace_ours() -> None:
    body = _build(streaming=True, extra_inputs={"stream_options": {"continuous_usage_stats": True}})
    assert body["stream_options"] == {"continuous_usage_stats": True}


@pytest.mark.parametrize("kind", list(EndpointType))
def test_fast_path_equals_slow_path(kind: EndpointType) -> None:
    from aiperf.endpoints import spec_of

    key = spec_of(kind).prompt_field
    fast = PayloadBuilder(endpoint_type=kind, model="m", streaming=True, extra_inputs={"top_p": 0.5})
    slow = PayloadBuilder(endpoint_type=kind, model="m", streaming=True, extra_inputs={"top_p": 0.5, key: None})
    a = orjson.loads(fast.build('q"\n', max_tokens=4))
    b = orjson.loads(slow.build('q"\n', max_tokens=4))
    assert b[key] is None
    b[key] = a[key]
    assert a == b


def test_the_catalog_has_one_entry_per_endpoint_kind() -> None:
    from aiperf.endpoints import CATALOG, spec_of

    assert [spec.kind for spec in CATALOG] == list(EndpointType)
    assert len({spec.path for spec in CATALOG}) == len(CATALOG)
    for spec in CATALOG:
        assert spec_of(str(spec.kind)) is spec and spec.path.startswith("/")
        assert spec.produces_tokens == (spec.token_field is not None)  # a limit only where tokens come back


def test_a_prompt_batch_is_a_list_of_inputs_or_of_text_parts() -> None:
    texts = ["a", "b", "c"]
    for kind, key in ((EndpointType.EMBEDDINGS, "input"), (EndpointType.COMPLETIONS, "prompt")):
        body = orjson.loads(PayloadBuilder(endpoint_type=kind, model="m", streaming=False).build("a\nb\nc", max_tokens=None,
                                                                                                 texts=texts))
        assert body[key] == texts
    chat = PayloadBuilder(endpoint_type=EndpointType.CHAT, model="m", streaming=False)
    body = orjson.loads(chat.build("a\nb\nc", max_tokens=None, texts=texts))
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": t} for t in texts]}]


def test_images_and_audio_are_chat_content_parts_as_aiperf_renders_them() -> None:
    chat = PayloadBuilder(endpoint_type=EndpointType.CHAT, model="m", streaming=False)
    body = orjson.loads(chat.build("look", max_tokens=None, images=["data:image/png;base64,AA=="],
                                   audios=["wav,UklG"]))
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
        {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
    ]


def test_for_model_sends_that_model_and_keeps_everything_else() -> None:
    builder = PayloadBuilder(endpoint_type=EndpointType.CHAT, model="a", streaming=True, extra_inputs={"top_p": 0.5})
    other = builder.for_model("b")
    assert orjson.loads(other.build("hi", max_tokens=3)) == {**orjson.loads(builder.build("hi", max_tokens=3)),
                                                               "model": "b"}
    assert orjson.loads(builder.build("hi", max_tokens=3))["model"] == "a"  # the original is unchanged
    assert builder.for_model("a") is builder
    pinned = PayloadBuilder(endpoint_type=EndpointType.COMPLETIONS, model="a", streaming=False,
                            extra_inputs={"model": "x"})
    assert orjson.loads(pinned.for_model("b").build("hi", max_tokens=None))["model"] == "x"  # --extra-inputs wins


def test_bodies_are_orjsons_bytes_and_a_lone_surrogate_is_a_type_error() -> None:
    # a long prompt is encoded by msgspec (a 1M-token one: one copy, ~2x faster): orjson's bytes
    builder = PayloadBuilder(endpoint_type=EndpointType.CHAT, model="m", streaming=True)
    prompt = "".join(chr(c) for c in range(0x3000) if not 0xD800 <= c <= 0xDFFF) * 6 + "\u2028\U0001f600"
    assert len(prompt) >= LONG_PROMPT
    history = [{"role": "assistant", "content": "x\ty"}]
    body = builder.build(prompt, max_tokens=7, history=history, images=["data:image/png;base64,AA=="])
    assert body == orjson.dumps(orjson.loads(body))
    assert orjson.loads(body)["messages"][-1]["content"][0]["text"] == prompt
    with pytest.raises(TypeError):
        builder.build("a\ud800" * LONG_PROMPT, max_tokens=None)
