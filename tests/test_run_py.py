"""run.py's environment set-up: a venv that runs another checkout's code is noticed and fixed.

A checkout copied with its ``.venv`` keeps the original's absolute paths: the editable install's
``.pth`` names the original ``src`` and the scripts' ``#!`` line the original venv's Python, so
that the copy's edits are silently ignored. run.py is imported from the repository root.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest
from workflow_helpers import ROOT

spec = importlib.util.spec_from_file_location("run", ROOT / "run.py")
run = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run)


def _venv(path: Path, source: Path, interpreter: Path) -> Path:
    """A fake venv: bin/python, a snakemake script started by ``interpreter``, and an editable
    install of weightdyn from ``source``."""
    site = path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "__editable__.weightdyn-0.1.0.pth").write_text(f"{source}\n")
    (path / "bin").mkdir()
    (path / "bin" / "python").write_text("")
    (path / "bin" / "snakemake").write_text(f"#!{interpreter}\nimport sys\n")
    return path


def test_a_venv_of_this_checkout_is_its_own(tmp_path: Path) -> None:
    venv = _venv(tmp_path / "copy" / ".venv", tmp_path / "copy" / "src", Path("unused"))
    (venv / "bin" / "snakemake").write_text(f"#!{venv / 'bin' / 'python'}\n")
    assert run.editable_source(venv) == tmp_path / "copy" / "src"
    assert run.script_venv(venv) == venv
    assert run.foreign_install(venv, tmp_path / "copy") is None


def test_an_editable_install_of_another_checkout_is_noticed(tmp_path: Path) -> None:
    venv = tmp_path / "copy" / ".venv"
    _venv(venv, tmp_path / "original" / "src", venv / "bin" / "python")
    why, copied = run.foreign_install(venv, tmp_path / "copy")
    assert why == f"imports weightdyn from {tmp_path / 'original' / 'src'}, another checkout"
    assert not copied


def test_a_copied_venv_is_noticed(tmp_path: Path) -> None:
    original = tmp_path / "original" / ".venv"
    venv = _venv(tmp_path / "copy" / ".venv", tmp_path / "copy" / "src", original / "bin/python")
    why, copied = run.foreign_install(venv, tmp_path / "copy")
    assert why == f"was copied from {original} (its scripts run that one's Python)" and copied


def _ensure(monkeypatch: pytest.MonkeyPatch, root: Path, venv: Path) -> list[list[str]]:
    """run.ensure_environment for checkout ``root`` and venv ``venv``; the commands it ran."""
    calls: list[list[str]] = []
    monkeypatch.setattr(run, "ROOT", root)
    monkeypatch.setattr(run, "VENV", venv)
    monkeypatch.setattr(run, "PY", venv / "bin" / "python")
    monkeypatch.setattr(
        run.venv, "create", lambda path, with_pip: _venv(path, root / "src", path / "bin/python")
    )
    monkeypatch.setattr(subprocess, "run", lambda cmd, check: calls.append([str(c) for c in cmd]))
    (root / "pyproject.toml").write_text("[project]\n")
    run.ensure_environment()
    return calls


def test_this_checkouts_venv_is_reinstalled_from_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    root = tmp_path / "copy"
    venv = _venv(root / ".venv", tmp_path / "original" / "src", root / ".venv" / "bin" / "python")
    calls = _ensure(monkeypatch, root, venv)
    assert calls[-1][-2:] == ["-e", f"{root}[test]"]
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{venv} imports weightdyn from {tmp_path / 'original' / 'src'}, another "
        "checkout: reinstalling weightdyn from this checkout"
    ]


def test_a_copied_venv_is_recreated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    root = tmp_path / "copy"
    venv = _venv(root / ".venv", root / "src", tmp_path / "original" / ".venv" / "bin" / "python")
    calls = _ensure(monkeypatch, root, venv)
    assert run.script_venv(venv) == venv  # made afresh
    assert calls[-1][-2:] == ["-e", f"{root}[test]"]
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith("(its scripts run that one's Python): recreating it")


def test_a_shared_venv_is_left_alone_and_this_src_goes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """WEIGHTDYN_VENV names a venv of another checkout: nothing is installed into it from here,
    even though its install stamp does not match this checkout's pyproject.toml."""
    shared = tmp_path / "original" / ".venv"
    _venv(shared, tmp_path / "original" / "src", shared / "bin" / "python")
    root = tmp_path / "copy"
    root.mkdir()
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    assert _ensure(monkeypatch, root, shared) == []
    assert run.os.environ["PYTHONPATH"] == f"{root / 'src'}:/elsewhere"
    assert capsys.readouterr().out.endswith(f": running {root / 'src'} instead (PYTHONPATH)\n")
