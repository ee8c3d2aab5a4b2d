# The two entry points of the README. Each one sets up what it needs.
.PHONY: demo test sanity units lint molecule importer fuzz ee clean

demo:  ## set up, then run site.yml on the local inventory (no GPU, no cluster needed)
	bash scripts/demo.sh

test:  ## the whole test suite (what CI runs)
	bash scripts/test.sh

sanity units lint molecule importer:  ## one stage of the suite (after `make test` or `make demo` set up)
	bash scripts/test.sh $@

fuzz:  ## the long, coverage-guided fuzz run (nightly): FUZZ_SECONDS per target (600), FUZZ_TARGETS to pick
	bash scripts/fuzz.sh

# The AWX execution environment, from this checkout: bootstrap builds the collection
# tarball and takes kubernetes.core out of the pinned `ansible` wheel, and
# ansible-builder installs both offline (execution-environment.yml). The base must
# be an RPM-based image that podman (or docker: EE_RUNTIME=docker) can pull or has.
EE_BASE_IMAGE ?= quay.io/centos/centos:stream10
EE_TAG ?= gpuops-platform-ee:$(shell sed -n 's/^version: //p' galaxy.yml)
EE_RUNTIME ?= podman
ee:  ## build the AWX execution environment image (needs podman or docker and a reachable base image)
	bash scripts/bootstrap.sh
	.venv/bin/ansible-builder build -f execution-environment.yml -c build/ee --container-runtime $(EE_RUNTIME) \
	  --build-arg EE_BASE_IMAGE=$(EE_BASE_IMAGE) -t $(EE_TAG)

clean:
	rm -rf build collections .cache .venv .venv-compat .venv-importer .venv-fuzz tests/output
