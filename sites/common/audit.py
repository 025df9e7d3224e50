"""The append-only audit log: one row per state change, written in the same transaction as the change.

Verifiers read outcomes from the data tables; the log says who did what, in which order, so a check can also
reject a right outcome reached the wrong way (an order placed twice, a post removed by the wrong user).
``site_time`` is the site clock (deterministic); ``created_at`` is the real UTC time, kept for people only.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from typing import Any

from mcpfleet.sites.common.db import clock


def record(
    conn: sqlite3.Connection,
    site: str,
    actor_id: int | None,
    actor: str,
    action: str,
    target_type: str | None = None,
    target_id: object = None,
    details: dict[str, Any] | None = None,
) -> int:
    """Append one entry; returns its id."""
    cur = conn.execute(
        "INSERT INTO audit_log (site, actor_id, actor, action, target_type, target_id, details, site_time, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            site,
            actor_id,
            actor,
            action,
            target_type,
            None if target_id is None else str(target_id),
            json.dumps(details or {}, sort_keys=True, separators=(",", ":")),
            clock(conn),
            datetime.now(UTC).isoformat(timespec="milliseconds"),
        ),
    )
    return int(cur.lastrowid or 0)
