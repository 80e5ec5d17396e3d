"""The HTTP API (torch-free): ``create_app(settings)`` builds the FastAPI application."""

from gradtrace.api.app import create_app

__all__ = ["create_app"]
