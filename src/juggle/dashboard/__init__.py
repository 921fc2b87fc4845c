"""The live web view of a Framework: JSON API, Prometheus metrics, an HTML page (app.py), the
tenants' view (tenants.py) and the server-kept chart history (history.py)."""

from juggle.dashboard.app import create_app, make_server, serve

__all__ = ["create_app", "make_server", "serve"]
