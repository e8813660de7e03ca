"""User data on the lab's JSON wire: the bytes an assignor adds to a subscription or an assignment (Kafka's
`userData`), as base64 under `user_data`.

    >>> encode_user_data(b"\\x00\\x00\\x00\\x03"), user_data_of({"user_data": "AAAAAw=="})
    ('AAAAAw==', b'\\x00\\x00\\x00\\x03')
    >>> user_data_of({"user_data": "not base64!"}), user_data_of({}), encode_user_data(None)
    (None, None, None)
"""

from __future__ import annotations

import base64
import binascii


def encode_user_data(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(bytes(data)).decode()


def user_data_of(message: dict) -> bytes | None:
    """The user data of a subscription or an assignment in the lab's form: None if it has none, or if it is not
    base64 (an assignor then sees none, as it would see bytes it cannot parse)."""
    raw = message.get("user_data") if isinstance(message, dict) else None
    if not isinstance(raw, str):
        return None
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return None
