"""What sandboxed servers must not see of a run's output folder (worker.beside_runs): the other runs in it, whose
records are world-readable once they end. The attack kit's pg-cluster-records case shows it end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpfleet.runner.launch.worker import beside_runs


def test_an_output_folder_holding_nothing_servers_run_from_is_hidden_whole(tmp_path: Path) -> None:
    output = tmp_path / "runs"
    (output / "mine").mkdir(parents=True)
    assert beside_runs(output / "mine") == [output.resolve()]


def test_a_run_written_beside_the_checkout_hides_each_run_folder_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`output.uri: .` run from a project folder: hiding the folder would hide what servers start from."""
    monkeypatch.chdir(tmp_path)
    for run, mark in (("mine", "trials"), ("old", "summary.json"), ("other", "run.json")):
        (tmp_path / run).mkdir()
        (tmp_path / run / mark).mkdir() if mark == "trials" else (tmp_path / run / mark).write_text("{}")
    (tmp_path / "tasks").mkdir()  # a pack, not a run
    (tmp_path / "venv").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "old")
    (tmp_path / "notes.txt").write_text("x")
    got = sorted(p.name for p in beside_runs(tmp_path / "mine"))
    assert got == ["mine", "old", "other"]
    (tmp_path / "later").mkdir()
    (tmp_path / "later" / "trials").mkdir()
    assert "later" in [p.name for p in beside_runs(tmp_path / "mine")]  # asked anew for each server
