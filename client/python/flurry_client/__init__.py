"""flurry_client — a pure-standard-library Python client for flurry, the UDP Snowflake ID
appliance (proto/PROTOCOL.md, wire v1). Client is blocking and thread-safe; AsyncClient is
the same over asyncio. See README.md."""

from .aio import AsyncClient
from .auth import Key
from .client import Client
from .key_file import read_key_file
from .layout import Decoded, Layout
from .options import (BadLayoutError, BadRequestError, Counters, ErrorCode, FencedError,
                      FlurryError, InvalidArgumentError, NoAnswerError, NotOwnerError, Options,
                      PingResult, ResolveFailedError, RetryExhaustedError, ShuttingDownError,
                      SystemCallError, UnauthorizedError, UnknownSequenceError)
from .wire import Info

__all__ = [
    "AsyncClient", "BadLayoutError", "BadRequestError", "Client", "Counters", "Decoded",
    "ErrorCode", "FencedError", "FlurryError", "Info", "InvalidArgumentError", "Key", "Layout",
    "NoAnswerError", "NotOwnerError", "Options", "PingResult", "ResolveFailedError",
    "RetryExhaustedError", "ShuttingDownError", "SystemCallError", "UnauthorizedError",
    "UnknownSequenceError", "read_key_file",
]
