"""The trial's PostgreSQL liveness check (pgtrial.same_server) on a loaded machine: a connection that times out is
asked again, a refused one is a dead server at once, a restarted server is reported as restarted."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcpfleet.runner.services import pgtrial
from mcpfleet.runner.services.base import EnvironmentLost
from mcpfleet.runner.services.pgtrial import CONNECT_TRIES, Login

LOGIN = Login(host="127.0.0.1", port=5432, user="postgres", password="x", database="d")
TIMEOUT = 'connection to server at "127.0.0.1", port 5432 failed: timeout expired'
REFUSED = 'connection to server at "127.0.0.1", port 5432 failed: Connection refused'


def answers(monkeypatch: pytest.MonkeyPatch, *replies: Any) -> list[int]:
    """server_started replaced by one that raises or returns each reply in turn; the returned list counts calls."""
    calls: list[int] = []

    def server_started(login: Login) -> str:
        calls.append(1)
        reply = replies[min(len(calls), len(replies)) - 1]
        if isinstance(reply, BaseException):
            raise reply
        return str(reply)

    monkeypatch.setattr(pgtrial, "server_started", server_started)
    return calls


def test_a_timed_out_connection_is_asked_again_before_the_server_is_called_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = answers(monkeypatch, OSError(TIMEOUT), OSError(TIMEOUT), "t0")
    asyncio.run(pgtrial.same_server(LOGIN, "t0"))
    assert len(calls) == 3


def test_a_server_that_never_answers_is_gone_after_the_last_try(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = answers(monkeypatch, OSError(TIMEOUT))
    with pytest.raises(EnvironmentLost, match="server is gone: OSError: .*timeout expired"):
        asyncio.run(pgtrial.same_server(LOGIN, "t0"))
    assert len(calls) == CONNECT_TRIES


def test_a_refused_connection_is_a_dead_server_at_once_and_a_restart_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = answers(monkeypatch, OSError(REFUSED), "t0")
    with pytest.raises(EnvironmentLost, match="Connection refused"):
        asyncio.run(pgtrial.same_server(LOGIN, "t0"))
    assert len(calls) == 1
    answers(monkeypatch, OSError(TIMEOUT), "t1")
    with pytest.raises(EnvironmentLost, match="restarted under the agent"):
        asyncio.run(pgtrial.same_server(LOGIN, "t0"))
