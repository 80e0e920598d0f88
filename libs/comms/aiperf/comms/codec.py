"""One typed msgpack codec per socket, created once."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

T = TypeVar("T")


class BadMessage(Exception):
    """A frame that does not decode as the channel's union; `frame` is its raw bytes (a receiver
    may still read what it needs from it, e.g. the request id of an unknown command)."""

    def __init__(self, *, peer: bytes | None, channel: str, reason: str, frame: bytes = b"") -> None:
        self.peer, self.channel, self.reason, self.frame = peer, channel, reason, frame
        super().__init__(f"bad message on {channel} from {peer!r}: {reason}")


class Codec(Generic[T]):
    """Encodes any message and decodes only `decode_type` (a tagged union or one Struct)."""

    def __init__(self, decode_type: Any, *, channel: str = "?") -> None:
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder: msgspec.msgpack.Decoder[T] = msgspec.msgpack.Decoder(decode_type)
        self.channel = channel

    def encode(self, message: object) -> bytes:
        """msgpack bytes of `message`."""
        return self._encoder.encode(message)

    def decode(self, frame: bytes | memoryview, *, peer: bytes | None = None) -> T:
        """The message in `frame`; raises `BadMessage` naming the peer and channel."""
        try:
            return self._decoder.decode(frame)
        except msgspec.DecodeError as exc:
            raise BadMessage(peer=peer, channel=self.channel, reason=str(exc), frame=bytes(frame)) from exc
