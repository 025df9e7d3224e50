"""The operator's own API client reads the environment once, not on every request (operator/kube.py)."""

from __future__ import annotations

import types

import pytest
from kubeemu import RunningEmulator

from mcpfleet.operator.kube import Kube, api_client, env_proxy


def rest(proxy: str | None = None) -> types.SimpleNamespace:
    return types.SimpleNamespace(proxy=proxy, proxy_headers=None)


def test_the_environments_proxy_is_resolved_once_as_a_trusting_session_would(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", "/nonexistent")
    r = rest()
    env_proxy(r, "https://api.example:6443")
    assert r.proxy is None  # none set
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy.example:3128")
    env_proxy(r, "https://api.example:6443")
    assert r.proxy == "http://proxy.example:3128"
    assert r.proxy_headers == {"Proxy-Authorization": "Basic dXNlcjpwdw=="}
    monkeypatch.setenv("NO_PROXY", "api.example")
    r = rest()
    env_proxy(r, "https://api.example:6443")
    assert r.proxy is None  # $NO_PROXY covers the API server
    r = rest("http://from-kubeconfig:8080")
    env_proxy(r, "https://elsewhere:6443")
    assert r.proxy == "http://from-kubeconfig:8080"  # a kubeconfig's proxy-url wins


async def test_the_clients_session_does_not_read_the_environment_per_request(
    kube: RunningEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    api = await api_client()
    try:
        assert api.rest_client.pool_manager.trust_env is False
        assert await Kube(api).list_pods("default", "mcpfleet.io/run=none") == []  # requests still go through
    finally:
        await api.close()
