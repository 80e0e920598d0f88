"""ZMQ channel wrappers of aiperf: typed codecs, ROUTER/DEALER, PUSH/PULL, the event bus.

Imports `aiperf.messages` only among first-party packages.
"""

from aiperf.comms.addressing import CONTROLLER_HOST_ENV, Addressing, Channel
from aiperf.comms.codec import BadMessage, Codec
from aiperf.comms.curve import (
    CURVE_KEYS_DIR_ENV,
    RAW_UPLOAD_TOKEN,
    CurveKeys,
    apply_curve,
    curve_of,
    load_curve,
    zmq_context,
)
from aiperf.comms.probe import probe_return_channel
from aiperf.comms.pubsub import EventBusProxy, Publisher, Subscriber
from aiperf.comms.requests import AskTimeout, PendingReplies
from aiperf.comms.sockets import (
    RAW_RECORDS_HWM,
    DealerSocket,
    PeerUnreachable,
    PullSocket,
    PushSocket,
    RouterSocket,
)

__all__ = [
    "CONTROLLER_HOST_ENV", "CURVE_KEYS_DIR_ENV", "RAW_RECORDS_HWM", "RAW_UPLOAD_TOKEN", "CurveKeys", "Addressing", "AskTimeout", "BadMessage", "Channel", "Codec",
    "DealerSocket", "EventBusProxy", "PeerUnreachable", "PendingReplies", "Publisher",
    "PullSocket", "PushSocket", "RouterSocket", "Subscriber", "apply_curve", "curve_of", "load_curve", "probe_return_channel",
    "zmq_context",
]
