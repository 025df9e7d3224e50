"""Fixtures for operator tests: a realistic Kubernetes API emulator (tests/kubeemu.py) with the EvalRun CRD.

``kube`` is a :class:`kubeemu.RunningEmulator`: ``.url``, ``.kubeconfig_path``, ``.emulator`` (the
RealisticEmulator: ``objects()``, ``request_counts``, ``set_pod_log()``...), ``.call()``, loop-routed
``create/get/patch/delete/objects``, ``.request()`` for raw HTTP and ``.kubectl()`` for the real kubectl.
Run an operator against it with ``kubeemu.run_kopf_in_thread(module, kube.kubeconfig_path, namespace=...)``.
"""

from __future__ import annotations

import base64
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:  # tests/ holds kubeemu.py; there is no package here on purpose
    sys.path.insert(0, _TESTS)

from kubeemu import EVALRUN_CRD_PATH, RunningEmulator, running_emulator  # noqa: E402
from s3server import moto_endpoint  # noqa: E402
from support import CREDS, NS  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    """Give ``conftest`` back to tests/conftest.py.

    Without an ``__init__.py`` here, pytest imports this file as the module ``conftest`` too, and
    ``from conftest import REPO`` in tests/*.py would then find this module instead. pytest calls
    this (historic) hook right after registering this file, and keeps its own reference to it.
    """
    parent = Path(__file__).resolve().parents[1] / "conftest.py"
    for plugin in config.pluginmanager.get_plugins():
        if getattr(plugin, "__file__", None) and Path(plugin.__file__).resolve() == parent:
            sys.modules["conftest"] = plugin
            break


@pytest.fixture
def kube() -> Iterator[RunningEmulator]:
    """A fresh emulator per test, served from its own thread, with crds/evalrun.yaml stored and served."""
    with running_emulator(crds=[EVALRUN_CRD_PATH]) as running:
        yield running


@pytest.fixture(autouse=True)
def no_operator_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """kopf retries a crashed daemon after a minute, so a crash can hide behind a passing test: fail on it."""
    yield
    bad = [
        r for r in caplog.get_records("call") if r.levelno >= logging.ERROR and r.name.startswith(("kopf", "mcpfleet"))
    ]
    assert not bad, "the operator logged errors:\n" + "\n".join(
        f"{r.name}: {r.getMessage()}\n{r.exc_text or ''}" for r in bad[:5]
    )


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    with moto_endpoint() as url:
        yield url


@pytest.fixture
def bucket(s3: str, monkeypatch: pytest.MonkeyPatch) -> str:
    for k, v in CREDS.items():
        monkeypatch.setenv(k, v)
    name = f"runs-{int(time.time() * 1000) % 10**9}"
    boto3.client("s3", endpoint_url=s3, region_name="us-east-1").create_bucket(Bucket=name)
    return name


@pytest.fixture
def operator_env(kube: RunningEmulator, scripted_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig_path))
    monkeypatch.setenv("MCPFLEET_SCRIPTED_URL", scripted_url)
    monkeypatch.setenv("MCPFLEET_STATUS_INTERVAL", "0.3")
    monkeypatch.setenv("MCPFLEET_CREATE_RATE", "50")
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s3-credentials", "namespace": NS},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in CREDS.items()},
        }
    )


@pytest.fixture
def image_pack() -> Iterator[Path]:
    """A task pack "in the image": outside /tmp, which trial pods mount over with an emptyDir."""
    from conftest import make_tiny_pack  # tests/conftest.py once pytest_configure has run (see there)

    base = Path(__file__).resolve().parents[2] / ".test-image"
    base.mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(dir=base))
    yield make_tiny_pack(root / "pack", tasks=3)
    shutil.rmtree(root, ignore_errors=True)
