"""Endpoint kinds this client speaks and the URL path of each."""

from __future__ import annotations

from aiperf.config import EndpointKind

EndpointType = EndpointKind
"""OpenAI-compatible endpoint kinds (AIPerf's `--endpoint-type` values): the model's enum."""


_PATHS: dict[EndpointType, str] = {
    EndpointType.CHAT: "/v1/chat/completions",
    EndpointType.COMPLETIONS: "/v1/completions",
    EndpointType.EMBEDDINGS: "/v1/embeddings",
}


def path_of(endpoint_type: EndpointType) -> str:
    """Return the default URL path of `endpoint_type` (e.g. ``/v1/chat/completions``)."""
    return _PATHS[EndpointType(endpoint_type)]


def produces_tokens(endpoint_type: EndpointType) -> bool:
    """True when responses of `endpoint_type` carry generated text (chat, completions)."""
    return endpoint_type is not EndpointType.EMBEDDINGS
