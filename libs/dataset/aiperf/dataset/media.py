"""Synthetic images and audio for a turn (AIPerf's `images` and `audio` of a synthetic dataset),
in the forms the worker sends: an image as a `data:image/<format>;base64,` URL, an audio clip as
`<format>,<base64>` (AIPerf's turn shapes, rendered as chat `image_url`/`input_audio` parts).

Images are random RGB noise (AIPerf's `source: noise`), encoded by Pillow through matplotlib's
`imsave` (imported on first use: a run without images never loads it). Audio is Gaussian noise
(sd 0.3, clipped to [-1, 1], AIPerf's) written as PCM WAV with the stdlib `wave` module.
Everything random comes from the caller's generator.
"""

from __future__ import annotations

import base64
import io
import wave

import numpy as np

from aiperf.config import Audio, Images
from aiperf.dataset.sampling import draw_length

__all__ = ["audio_clip", "noise_image"]

_IMAGE_FORMATS = ("png", "jpeg")
_DTYPES = {8: np.uint8, 16: np.int16, 24: np.int32, 32: np.int32}


def noise_image(rng: np.random.Generator, spec: Images) -> str:
    """One image of `spec` (size and, for `random`, format drawn from `rng`) as a data URL."""
    from matplotlib.image import imsave  # Pillow's encoders; heavy, so only when images are asked for

    fmt = spec.format if spec.format != "random" else _IMAGE_FORMATS[int(rng.integers(len(_IMAGE_FORMATS)))]
    width, height = draw_length(rng, spec.width), draw_length(rng, spec.height)
    pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    imsave(buffer, pixels, format=fmt)
    return f"data:image/{fmt};base64,{base64.b64encode(buffer.getvalue()).decode()}"


def audio_clip(rng: np.random.Generator, spec: Audio) -> str:
    """One clip of `spec` (length, sample rate and depth drawn from `rng`) as `wav,<base64>`."""
    seconds = max(0.01, float(rng.normal(spec.length.mean, spec.length.stddev)) if spec.length.stddev
                  else spec.length.mean)
    rate_hz = int(spec.sample_rates[int(rng.integers(len(spec.sample_rates)))] * 1000)
    depth = spec.depths[int(rng.integers(len(spec.depths)))]
    samples = int(seconds * rate_hz)
    signal = np.clip(rng.normal(0.0, 0.3, (samples, spec.channels)), -1.0, 1.0)
    if depth == 8:  # unsigned, centred on 128
        pcm = ((signal * 127) + 128).astype(np.uint8).tobytes()
    else:
        scaled = (signal * (2 ** (depth - 1) - 1)).astype(_DTYPES[depth])
        pcm = scaled.astype("<i4").view(np.uint8).reshape(-1, 4)[:, :3].tobytes() if depth == 24 \
            else scaled.astype(f"<i{depth // 8}").tobytes()
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(spec.channels)
        out.setsampwidth(depth // 8)
        out.setframerate(rate_hz)
        out.writeframes(pcm)
    return f"wav,{base64.b64encode(buffer.getvalue()).decode()}"
