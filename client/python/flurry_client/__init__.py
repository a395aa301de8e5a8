"""flurry_client — a pure-standard-library Python client for flurry, the UDP Snowflake ID
appliance (proto/PROTOCOL.md, wire v1). Client is blocking and thread-safe; AsyncClient is
the same over asyncio; flurry_client.forms writes and reads the text forms of an ID. See
README.md."""

from . import forms
from .aio import AsyncClient
from .auth import Key
from .client import Client
from .key_file import read_key_file
from .layout import Decoded, Layout
from .options import (BadLayoutError, BadRequestError, Counters, DrainingError, ErrorCode,
                      ExhaustedError, FencedError, FlurryError, InvalidArgumentError,
                      NoAnswerError, NotOwnerError, Options, PingResult, ResolveFailedError,
                      RetryExhaustedError, ShuttingDownError, SystemCallError,
                      UnauthorizedError, UnknownSequenceError)
from .wire import Info

# The project's version (the file VERSION at the repository root); pyproject.toml says the same.
__version__ = "0.2.0"

__all__ = [
    "AsyncClient", "BadLayoutError", "BadRequestError", "Client", "Counters", "Decoded",
    "DrainingError", "ErrorCode", "ExhaustedError", "FencedError", "FlurryError", "Info",
    "InvalidArgumentError", "Key", "Layout", "NoAnswerError", "NotOwnerError", "Options",
    "PingResult", "ResolveFailedError", "RetryExhaustedError", "ShuttingDownError",
    "SystemCallError", "UnauthorizedError", "UnknownSequenceError", "__version__", "forms",
    "read_key_file",
]
