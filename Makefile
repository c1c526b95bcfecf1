# Two entry points for a fresh clone: `make demo` and `make test`. Both create .venv on demand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
COMPILED := $(VENV)/.compiled
# Apache Kafka's jars (apache_kafka/pom.xml pins the release), fetched by Maven into .cache/.
KAFKA := .cache/kafka/.fetched

.PHONY: demo test lint install clean

# Java, Maven and Chromium from Debian's packages when missing (.ci/system-packages).
SYSTEM := .cache/.system

$(SYSTEM): .ci/system-packages
	.ci/system-packages
	mkdir -p .cache && touch $(SYSTEM)

$(STAMP): pyproject.toml $(SYSTEM)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

# The flat encoding and the explorer loop compiled by Cython (model_check/explore/compiled.py);
# without a compiler both run as Python.
$(COMPILED): $(STAMP) model_check/explore/flat.py model_check/explore/flat.pxd model_check/explore/explorer.py \
		model_check/explore/compiled.py
	$(BIN)/python -m model_check.explore.compiled
	touch $(COMPILED)

$(KAFKA): apache_kafka/pom.xml $(STAMP)
	$(BIN)/python -m apache_kafka.install
	touch $(KAFKA)

install: $(COMPILED) $(KAFKA)

demo: $(COMPILED) $(KAFKA)
	$(BIN)/isrlab demo

lint: $(STAMP)
	$(BIN)/ruff check .

test: $(COMPILED) $(KAFKA)
	$(BIN)/ruff check .
	$(BIN)/pytest -n 2 --dist loadgroup -m "not serial"
	$(BIN)/pytest -m serial

clean:
	rm -rf $(VENV) .cache .pytest_cache .ruff_cache .hypothesis model_check/explore/_flat_c.* model_check/explore/_explorer_c.*
