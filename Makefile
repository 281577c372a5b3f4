# koe — two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
ORACLE := .oracle
BIN    := $(VENV)/bin
# A CPU build of torch where no NVIDIA GPU is present; the default (CUDA) build otherwise.
TORCH_SPEC := $(shell if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then echo "torch"; else echo "torch==2.13.0"; fi)

.PHONY: demo test venv oracle clean

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e ".[server,dev]"
	touch $@

# Upstream qwen-tts==0.1.1 in its own virtualenv: the oracle for parity tests (never imported by koe).
oracle: $(ORACLE)/.installed
$(ORACLE)/.installed: tests/oracle/requirements.txt
	test -x $(ORACLE)/bin/python || $(PYTHON) -m venv $(ORACLE)
	$(ORACLE)/bin/pip install -q "$(TORCH_SPEC)"
	$(ORACLE)/bin/pip install -q -r tests/oracle/requirements.txt
	$(ORACLE)/bin/pip install -q --no-deps qwen-tts==0.1.1
	touch $@

demo: venv
	$(BIN)/koe demo

test: venv oracle
	KOE_ORACLE_PYTHON=$(CURDIR)/$(ORACLE)/bin/python $(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) $(ORACLE) .pytest_cache build *.egg-info
