# Salvo — two commands: `make run` and `make test`.
#
# Both first install the Debian packages Salvo needs, and only the ones that are missing
# (one `apt-get update`, then one `apt-get install`), so a fresh Debian machine works as is.

# libnghttp2-dev: the HTTP/2 machinery of `salvo mock --protocol h2`; nghttp2-client (nghttp,
# h2load) and curl: the real HTTP/2 clients its tests run.
SYSTEM_PACKAGES := libssl-dev libjemalloc-dev openssl pkg-config iproute2 libnghttp2-dev nghttp2-client curl
# For `make test` only: the other teams' senders the tests run against `salvo mock`
# (Tests/SalvoBenchTests/LegacyClientTests.swift): the PHP cookbook sender, and PyAPNs, which
# scripts/pyapns.sh installs from PyPI into a virtualenv under .build/. When they cannot be
# installed (no network) the tests go on without them, and those two say they were skipped and why.
TEST_PACKAGES := php-cli python3-venv python3-lib2to3
SWIFT ?= swift

.PHONY: run test bench deps test-deps build release clean

# Installs the missing ones of the packages given: one `apt-get update`, one `apt-get install`.
install-missing = \
	missing=""; \
	for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing missing system packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
	  $$SUDO apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$missing; \
	fi

deps:
	@$(call install-missing,$(SYSTEM_PACKAGES))

test-deps:
	@($(call install-missing,$(SYSTEM_PACKAGES) $(TEST_PACKAGES))) || { \
	  echo "could not install $(TEST_PACKAGES): the tests with them will be skipped"; \
	  $(call install-missing,$(SYSTEM_PACKAGES)); }
	@scripts/pyapns.sh || true

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

run: release
	$(SWIFT) run -c release --skip-build salvo demo --count 1000000

test: test-deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

bench: deps
	cd Benchmarks && $(SWIFT) package --allow-writing-to-package-directory benchmark

clean:
	rm -rf .build Benchmarks/.build
