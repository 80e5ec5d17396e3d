"""Where an installed gradtrace finds its viewer and keeps its permalinks."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradtrace import frontend_files
from gradtrace.service.settings import Settings

REPO = Path(__file__).resolve().parents[2]


def _viewer(directory: Path) -> Path:
    directory.mkdir(parents=True)
    (directory / "index.html").write_text("<!doctype html>")
    return directory


def test_the_checkout_serves_a_checkout() -> None:
    assert frontend_files.frontend_dir({}) == REPO / "frontend"


def test_the_packaged_copy_wins_over_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    packaged = _viewer(tmp_path / "_frontend")
    monkeypatch.setattr(frontend_files, "PACKAGED", packaged)
    assert frontend_files.frontend_dir({}) == packaged


def test_the_override_wins_over_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    packaged = _viewer(tmp_path / "_frontend")
    monkeypatch.setattr(frontend_files, "PACKAGED", packaged)
    override = tmp_path / "elsewhere"
    assert frontend_files.frontend_dir({"GRADTRACE_FRONTEND_DIR": str(override)}) == override
    assert frontend_files.frontend_dir({"GRADTRACE_FRONTEND_DIR": "  "}) == packaged  # blank: unset


def test_with_no_viewer_anywhere_the_packaged_place_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(frontend_files, "PACKAGED", tmp_path / "missing" / "_frontend")
    monkeypatch.setattr(frontend_files, "CHECKOUT", tmp_path / "missing" / "frontend")
    assert frontend_files.frontend_dir({}) == tmp_path / "missing" / "_frontend"


def test_the_renderer_and_the_server_use_the_locator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gradtrace.render.node_tool import RenderUnavailable, frontend_dir

    empty = tmp_path / "empty"
    monkeypatch.setenv("GRADTRACE_FRONTEND_DIR", str(empty))
    assert Settings.from_env().frontend_dir == empty
    with pytest.raises(RenderUnavailable, match="lacks them"):
        frontend_dir()


def test_permalinks_live_in_the_user_data_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert Settings.from_env({}).sqlite_path == tmp_path / "data" / "gradtrace" / "gradtrace.db"
    chosen = Settings.from_env({"GRADTRACE_DB": str(tmp_path / "mine.db")}).sqlite_path
    assert chosen == tmp_path / "mine.db"


def test_a_server_without_its_viewer_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import asyncio
    import concurrent.futures

    import httpx

    from gradtrace.api.app import create_app

    settings = Settings.from_env(
        {"GRADTRACE_FRONTEND_DIR": str(tmp_path / "none"), "GRADTRACE_DB": str(tmp_path / "db")}
    )
    with caplog.at_level("WARNING", logger="gradtrace.api.static"):
        app = create_app(settings)
    assert f"no viewer at {tmp_path / 'none'}" in caplog.text

    async def get_root() -> httpx.Response:  # the app in process, without its lifespan: no workers
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as client:
            return await client.get("/")

    # a thread of its own: a browser test earlier in the run may have left this thread's loop set
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        response = pool.submit(asyncio.run, get_root()).result()
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
