"""OpenAI-compatible request building and response parsing (pure: no sockets, no clocks).

`CATALOG` has one entry per endpoint kind (path, fields, streaming, its payload and response
functions); `PayloadBuilder` formats request bodies on the worker's hot path; `parse_response`
turns a worker's `RequestRecord` (raw reads + timestamps) into timed content responses, usage
and errors (`FirstContent` spots the first content of a stream as it arrives); `SseParser` is
the incremental event-stream parser underneath.
"""

from aiperf.endpoints.catalog import CATALOG, EndpointSpec, EndpointType, path_of, produces_tokens, spec_of
from aiperf.endpoints.parsed import ContentResponse, ParsedResponse, Usage
from aiperf.endpoints.payload import PayloadBuilder
from aiperf.endpoints.responses import FirstContent, parse_response
from aiperf.endpoints.sse import SseEvent, SseParser

__all__ = [
    "CATALOG", "ContentResponse", "EndpointSpec", "EndpointType", "FirstContent", "ParsedResponse", "PayloadBuilder",
    "SseEvent", "SseParser", "Usage", "parse_response", "path_of", "produces_tokens", "spec_of",
]
