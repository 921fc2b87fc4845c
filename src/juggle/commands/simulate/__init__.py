"""``juggle simulate``: one module per scenario area, each adding its commands with
``register(simulate_app)`` (:mod:`.scenarios` lists them)."""
