"""The live web view of a Framework: JSON API, Prometheus metrics, an HTML page (app.py)."""

from juggle.dashboard.app import create_app, make_server, serve

__all__ = ["create_app", "make_server", "serve"]
