"""The live web view of a Framework: JSON API, Prometheus metrics, an HTML page (app.py)."""
