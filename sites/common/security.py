"""Password hashing and random tokens.

PBKDF2 with a deliberately low iteration count: these are benchmark sites on loopback, and seeding hundreds of
accounts must stay fast. The stored format names the iterations, so verification follows whatever was stored.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

ITERATIONS = 1000


def hash_password(password: str, salt: str) -> str:
    """``pbkdf2_sha256$iterations$salt$hex``; the caller picks the salt (seeding derives it from the seed)."""
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), ITERATIONS).hex()
    return f"pbkdf2_sha256${ITERATIONS}${salt}${digest}"


def new_password_hash(password: str) -> str:
    return hash_password(password, secrets.token_hex(8))


def check_password(password: str, stored: str) -> bool:
    try:
        scheme, iterations, salt, digest = stored.split("$")
    except ValueError:
        return False
    if scheme != "pbkdf2_sha256":
        return False
    got = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), int(iterations)).hex()
    return hmac.compare_digest(got, digest)


def token() -> str:
    return secrets.token_urlsafe(24)


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())
