"""Fixtures for operator tests: a realistic Kubernetes API emulator (tests/kubeemu.py) with the EvalRun CRD.

``kube`` is a :class:`kubeemu.RunningEmulator`: ``.url``, ``.kubeconfig_path``, ``.emulator`` (the
RealisticEmulator: ``objects()``, ``request_counts``, ``set_pod_log()``...), ``.call()``, loop-routed
``create/get/patch/delete/objects``, ``.request()`` for raw HTTP and ``.kubectl()`` for the real kubectl.
Run an operator against it with ``kubeemu.run_kopf_in_thread(module, kube.kubeconfig_path, namespace=...)``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:  # tests/ holds kubeemu.py; there is no package here on purpose
    sys.path.insert(0, _TESTS)

from kubeemu import EVALRUN_CRD_PATH, RunningEmulator, running_emulator  # noqa: E402


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
    bad = [r for r in caplog.get_records("call")
           if r.levelno >= logging.ERROR and r.name.startswith(("kopf", "mcpfleet"))]
    assert not bad, "the operator logged errors:\n" + "\n".join(
        f"{r.name}: {r.getMessage()}\n{r.exc_text or ''}" for r in bad[:5])
