# The two commands of the README: `make test` and `make demo`. Both create .venv when it is missing.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: test lint unit demo clean

$(INSTALLED): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(INSTALLED)

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint
	$(PY) -m pytest -n 2 --dist loadfile

# The suite without the tests that start SeaweedFS and moto servers.
unit: $(INSTALLED)
	$(PY) -m pytest -n 2 --dist loadfile -m "not backends"

demo: $(INSTALLED)
	$(PY) dags_examples/core_tour.py

clean:
	rm -rf $(VENV) local_data .pytest_cache
