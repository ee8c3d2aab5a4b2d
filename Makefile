# The two entry points of the README. Each one sets up what it needs.
.PHONY: demo test sanity units lint molecule importer fuzz clean

demo:  ## set up, then run site.yml on the local inventory (no GPU, no cluster needed)
	bash scripts/demo.sh

test:  ## the whole test suite (what CI runs)
	bash scripts/test.sh

sanity units lint molecule importer:  ## one stage of the suite (after `make test` or `make demo` set up)
	bash scripts/test.sh $@

fuzz:  ## the long, coverage-guided fuzz run (nightly): FUZZ_SECONDS per target (600), FUZZ_TARGETS to pick
	bash scripts/fuzz.sh

clean:
	rm -rf build collections .cache .venv .venv-compat .venv-importer .venv-fuzz tests/output
