"""The ``test_*.py`` files here are cocotb testbenches: they run inside a simulator, started by
``tests/fabric/test_rtl_cocotb.py``, not as pytest modules."""

collect_ignore_glob = ["*.py"]
