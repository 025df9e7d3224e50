"""The operator's own API client (operator/kube.py) and its login (operator/login.py): the environment read once,
not per request; a refused token logged in again; kubeconfigs kopf's reader cannot use told apart; and no client
library in the operator's memory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from aiohttp import web
from kubeemu import RunningEmulator

from mcpfleet.operator.kube import ApiClient, Kube, api_client, env_proxy
from mcpfleet.operator.login import connection, needs_client

REPO = Path(__file__).resolve().parents[2]


def test_the_environments_proxy_is_resolved_once_as_a_trusting_session_would(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", "/nonexistent")
    assert env_proxy(None, "https://api.example:6443") == (None, None)  # none set
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy.example:3128")
    assert env_proxy(None, "https://api.example:6443") == (
        "http://proxy.example:3128",
        {"Proxy-Authorization": "Basic dXNlcjpwdw=="},
    )
    monkeypatch.setenv("NO_PROXY", "api.example")
    assert env_proxy(None, "https://api.example:6443") == (None, None)  # $NO_PROXY covers the API server
    # a kubeconfig's proxy-url wins
    assert env_proxy("http://from-kubeconfig:8080", "https://elsewhere:6443") == ("http://from-kubeconfig:8080", None)


async def test_the_clients_session_does_not_read_the_environment_per_request(
    kube: RunningEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    api = await api_client()
    try:
        assert await Kube(api).list_pods("default", "mcpfleet.io/run=none") == []  # requests go through
        assert api.session is not None and api.session.trust_env is False
        assert api.headers["Authorization"] == f"Bearer {kube.token}"  # the kubeconfig's token
    finally:
        await api.close()


async def test_a_call_refused_as_unauthorised_logs_in_again_and_is_made_once_more() -> None:
    """A rotated service-account token: the server refuses the old one (401); the client logs in again, and the
    call goes through with the new token, once, with its body."""
    seen: list[tuple[str | None, bytes]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.headers.get("Authorization"), await request.read()))
        if request.headers.get("Authorization") != "Bearer new":
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        return web.json_response({"kind": "Pod"}, status=201)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/ns/pods", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    logins: list[str] = []

    async def relogin() -> kopf.ConnectionInfo:
        logins.append("again")
        return kopf.ConnectionInfo(server=f"http://127.0.0.1:{port}", token="new")

    api = ApiClient(kopf.ConnectionInfo(server=f"http://127.0.0.1:{port}", token="old"), relogin)
    try:
        assert await Kube(api).create_pod("ns", {"metadata": {"name": "p", "labels": {}}}) is None
    finally:
        await api.close()
        await runner.cleanup()
    assert logins == ["again"]
    assert [auth for auth, _ in seen] == ["Bearer old", "Bearer new"]
    assert seen[0][1] == seen[1][1] == b'{"metadata": {"name": "p", "labels": {}}}'


def kubeconfig(path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                "clusters": [{"name": "k", "cluster": cluster or {"server": "https://api.example:6443"}}],
                "users": [{"name": "u", "user": user}],
            }
        )
    )
    return path


def test_kubeconfigs_only_a_client_library_can_read_are_told_apart(tmp_path: Path) -> None:
    plain = kubeconfig(tmp_path / "plain", {"token": "t"})
    assert needs_client([plain]) is None
    certs = kubeconfig(tmp_path / "certs", {"client-certificate": "/abs/c.crt", "client-key": "/abs/c.key"})
    assert needs_client([certs]) is None
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "aws"}}
    assert needs_client([kubeconfig(tmp_path / "eks", exec_user)]) == "users[u].exec"
    assert needs_client([kubeconfig(tmp_path / "gke", {"auth-provider": {"name": "gcp"}})]) == "users[u].auth-provider"
    assert needs_client([kubeconfig(tmp_path / "tf", {"tokenFile": "/var/run/token"})]) == "users[u].tokenFile"
    relative = kubeconfig(tmp_path / "rel", {"token": "t"}, {"server": "https://x", "certificate-authority": "ca.crt"})
    assert needs_client([relative]) == "clusters[k].certificate-authority (a relative path)"
    # merged as kubectl merges: the first file naming the user wins
    assert needs_client([plain, kubeconfig(tmp_path / "eks2", exec_user)]) is None


async def test_a_plugin_kubeconfig_without_the_client_library_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = kubeconfig(tmp_path / "eks", {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "aws"}})
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setitem(sys.modules, "kubernetes_asyncio", None)  # not installed
    with pytest.raises(kopf.LoginError, match=r"users\[u\]\.exec needs the kubernetes-asyncio package"):
        await connection(kopf.OperatorSettings(), None)


async def test_in_a_pod_the_api_server_is_the_one_the_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = tmp_path / "sa"
    account.mkdir()
    (account / "token").write_text("sa-token\n")
    real_exists = os.path.exists
    monkeypatch.setattr(
        os.path,
        "exists",
        lambda p: real_exists(str(p).replace("/var/run/secrets/kubernetes.io/serviceaccount", str(account))),
    )
    real_open = open

    def fake_open(p: Any, *a: Any, **k: Any) -> Any:
        return real_open(str(p).replace("/var/run/secrets/kubernetes.io/serviceaccount", str(account)), *a, **k)

    monkeypatch.setattr("builtins.open", fake_open)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    info = await connection(kopf.OperatorSettings(), None)
    assert (info.server, info.token) == ("https://[fd00::1]:6443", "sa-token")


def test_the_operator_process_holds_no_kubernetes_client_library() -> None:
    """kopf imports the client libraries it finds (65 MB and 15 MB); the operator keeps them from it."""
    code = (
        "import sys, mcpfleet.operator, kopf; "
        "print(sorted(m for m in ('kubernetes', 'kubernetes_asyncio') if m in sys.modules)); "
        "import kubernetes_asyncio; print('importable')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "importable"]  # kept from kopf, yet importable afterwards (login.py)
