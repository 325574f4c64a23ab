# Both targets do the whole set-up on a fresh clone: .venv, torch first (pinned, from local disk where the
# machine has it), then the package with its dev extras.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.14.1 torchvision==0.29.1
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check gnnperf tests experiments
	$(BIN)/ruff format --check gnnperf tests experiments

# pytest exits 5 when it collected no tests: that is a failure, never a silent pass.
test: $(STAMP) lint
	$(BIN)/python -m pytest -q; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

demo: $(STAMP)
	$(BIN)/python -m gnnperf.demo

clean:
	rm -rf $(VENV) .cache
