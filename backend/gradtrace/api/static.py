"""The viewer: ``frontend/`` at ``/``, its packages under ``/vendor/``, ``/embed/{id}``.

Mounted after the API routes so ``/api/v1/…`` always wins. Missing HTML (the viewer is
written by another engineer) answers the 404 envelope, never a 500.
"""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from gradtrace.api.errors import ApiError
from gradtrace.service.hashing import is_permalink_id

log = logging.getLogger(__name__)


def embed_router(frontend_dir: Path) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    # HEAD as GET (link checkers, docs builds, proxies ask it): FileResponse sends no body for it.
    @router.api_route("/embed/{spec_id}", methods=["GET", "HEAD"])
    async def embed(spec_id: str) -> FileResponse:
        if not is_permalink_id(spec_id):
            raise ApiError(404, "not_found", "no such permalink", "/id")
        page = frontend_dir / "embed.html"
        if not page.is_file():
            raise ApiError(404, "not_found", "the embed player is not installed")
        return FileResponse(page, media_type="text/html")

    return router


class ViewerFiles(StaticFiles):
    """The viewer's files, minus what is not the viewer: packages, build tools, manifests.

    (The packages the page needs are mounted on their own under /vendor/, see _VENDOR.)
    """

    _HIDDEN = ("node_modules", "tools", "package.json", "package-lock.json")

    def get_path(self, scope):  # noqa: ANN001, ANN201 - Starlette's signature
        path = super().get_path(scope)
        first = path.replace("\\", "/").lstrip("/").split("/", 1)[0]
        if first in self._HIDDEN or (first.startswith(".") and first != "."):
            raise StarletteHTTPException(404)
        return path


# URL name -> the package's directory of built files under frontend/node_modules.
_VENDOR = {
    "elkjs": "elkjs/lib",  # the layout engine
    "katex": "katex/dist",  # the inspector's math (JS, CSS, fonts)
    "momoa": "@humanwhocodes/momoa/dist",  # the editor's JSON source locations
}


def mount_frontend(app: FastAPI, frontend_dir: Path) -> None:
    """``frontend_dir`` comes from ``gradtrace.frontend_files`` (through the settings)."""
    if not (frontend_dir / "index.html").is_file():  # the API works; say why / will be a 404
        log.warning("no viewer at %s: / and /embed answer 404 (reinstall gradtrace)", frontend_dir)
    for name, subdir in _VENDOR.items():
        directory = frontend_dir / "node_modules" / subdir
        if directory.is_dir():
            app.mount(f"/vendor/{name}", StaticFiles(directory=directory), name=name)
    swagger = frontend_dir / "node_modules" / "swagger-ui-dist"
    if swagger.is_dir():  # /docs (the API's own page)
        app.mount("/vendor/swagger-ui", StaticFiles(directory=swagger), name="swagger-ui")
    # html=True: "/" serves index.html. A missing directory is not mounted (Starlette would raise
    # on every request): the 404 envelope answers instead, and the warning above says why.
    if frontend_dir.is_dir():
        app.mount("/", ViewerFiles(directory=frontend_dir, html=True), name="frontend")
