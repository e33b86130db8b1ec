# The course's two entry points: `make book` builds and opens the book; `make test`
# runs the whole test suite (`make quick`, all but its slow tests: a developer's inner
# loop). They set up a virtual environment in .venv first.
PYTHON ?= python3
# pytest-xdist processes for `make test` (each test module on one of them; three keep two
# cores busy while one waits on a notebook or a browser)
TEST_WORKERS ?= 3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: book test quick system browser postgres sandbox lint constraints data clean

# requirements.txt names what the course imports; constraints.txt pins all they bring.
$(STAMP): requirements.txt constraints.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt -c constraints.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

## Pin again everything requirements.txt brings (after changing it): a fresh environment,
## then pip freeze into constraints.txt.
constraints:
	rm -rf .venv-constraints
	$(PYTHON) -m venv .venv-constraints
	.venv-constraints/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
	{ sed -n '/^#/p' constraints.txt; .venv-constraints/bin/python -m pip freeze --all --exclude pip; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf .venv-constraints

## Build the HTML book (no GPU needed) and open it in a browser where there is one.
book: $(STAMP)
	$(VENV)/bin/jupyter-book build . -W -n --keep-going
	$(PY) -m tilelab.open_book _build/html/index.html

## The Debian packages `make test` needs and this machine lacks (chromium and its driver,
## postgresql, bubblewrap), in one apt-get update and install where apt-get runs as root;
## browser, postgres and sandbox below then say what is still missing.
system:
	@missing="$$(command -v chromium >/dev/null && command -v chromedriver >/dev/null || echo chromium chromium-driver) \
	  $$(command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || echo postgresql) \
	  $$(command -v bwrap >/dev/null || echo bubblewrap)"; \
	if [ -n "$$(echo $$missing)" ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || true; \
	fi

## Headless Chromium and its driver, for the browser tests of the built book.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } || \
	  echo "make browser: could not install chromium and chromium-driver (needs apt-get as root); browser tests will be skipped"

## A PostgreSQL server (Debian's package) for the test of a PostgreSQL gradebook.
postgres:
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } || \
	  echo "make postgres: could not install postgresql (needs apt-get as root); the PostgreSQL gradebook test will be skipped"

## bubblewrap, the OS sandbox every graded submission runs in (Debian's package: signed,
## security-updated by apt, the same bwrap the distribution's own sandboxes use).
sandbox:
	@command -v bwrap >/dev/null || \
	  { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; } || \
	  echo "make sandbox: could not install bubblewrap (needs apt-get as root; or: sudo apt-get install bubblewrap); sandboxed grading tests will be skipped"

## Everything: unit tests, emulator, grader pipeline, book build and browser checks, on
## TEST_WORKERS processes; the longest modules start first (tests/conftest.py).
test: $(STAMP) system browser postgres sandbox
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

## The inner loop: every test but those marked slow (class runs, the corpora, the book's
## build, a grade per case), on TEST_WORKERS processes: under two minutes on two cores.
quick: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf _build .pytest_cache
