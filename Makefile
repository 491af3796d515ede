.PHONY: install test bench demo
install:
	python3 -m venv .venv && .venv/bin/pip install -e '.[test]'
test:
	.venv/bin/python -m pytest -q -n 4
bench:
	.venv/bin/python bench/overhead.py && .venv/bin/python bench/explorers.py
demo:
	.venv/bin/orchestrate demo
