# Salvo — two commands: `make run` and `make test`.
# Hardening: `make fuzz` (libFuzzer targets, FUZZ_SECONDS each, FUZZ_TARGETS to pick some),
# `make test-tsan` and `make test-asan` (the whole suite under a sanitizer).
#
# Both first install the Debian packages Salvo needs, and only the ones that are missing
# (one `apt-get update`, then one `apt-get install`), so a fresh Debian machine works as is.

# libnghttp2-dev: the HTTP/2 machinery of `salvo mock --protocol h2`; nghttp2-client (nghttp,
# h2load) and curl: the real HTTP/2 clients its tests run.
SYSTEM_PACKAGES := libssl-dev libjemalloc-dev openssl pkg-config iproute2 libnghttp2-dev nghttp2-client curl
# For `make test`, required: postgresql, the throwaway clusters (initdb, pg_ctl) of the
# SalvoPostgres tests (a real server, nothing mocked).
TEST_SYSTEM_PACKAGES := postgresql
# For `make test` only: the other teams' senders the tests run against `salvo mock`
# (Tests/SalvoBenchTests/LegacyClientTests.swift, HTTP2ClientTests.swift): the PHP cookbook
# sender; PyAPNs, which scripts/pyapns.sh installs from PyPI into a virtualenv under .build/;
# and aioapns and pyapns-client, which scripts/h2-python-clients.sh installs the same way.
# tinyproxy (HTTP CONNECT with Basic auth) and microsocks (SOCKS5 with a user and password):
# the real proxies the proxy tests start (Tests/SalvoCLITests/ProxyTests.swift).
# When they cannot be installed (no network) the tests go on without them, and those tests
# say they were skipped and why.
TEST_PACKAGES := php-cli python3-venv python3-lib2to3 tinyproxy microsocks
SWIFT ?= swift
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=

.PHONY: run test test-deps test-tsan test-asan fuzz bench docs deps build release clean

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
	@($(call install-missing,$(SYSTEM_PACKAGES) $(TEST_SYSTEM_PACKAGES) $(TEST_PACKAGES))) || { \
	  echo "could not install $(TEST_PACKAGES): the tests with them will be skipped"; \
	  $(call install-missing,$(SYSTEM_PACKAGES) $(TEST_SYSTEM_PACKAGES)); }
	@scripts/pyapns.sh || true
	@scripts/h2-python-clients.sh || true
	@scripts/openapi-python.sh || true

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

run: release
	$(SWIFT) run -c release --skip-build salvo demo --protocol h2 --count 1000000
	$(SWIFT) run -c release --skip-build salvo demo --protocol binary --count 1000000

test: test-deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

# Tests whose premise is a relation in real time (an error answered within the error wait,
# or later than the record retention, a kill landing within one stretch, 8 MiB through a
# slow reader in 60 s, a large send within its time limit, HTTP/2 growth before an answer
# held 5 s) that a sanitizer's 5-20x slowdown on a shared machine breaks: they fail there by
# timing, not by a sanitizer report.
# `make test` runs them.
SANITIZER_SKIP := --skip 'anHTTP2SenderGrowsBeforeTheFirstAnswer|killedUnderLateErrorsAndResumedNothingIsLost|killedMidCampaignAndResumedNothingIsLost|anErrorOlderThanEveryRecordFailsWhatItCoversAsDeliveryUnknown|theReportCarriesTheErrorLatencies|largeWritesSurvivePartialWritesToASlowReader|everyNotificationIsAcceptedOverSeveralShardsAndConnections'

# The whole suite under ThreadSanitizer; SALVO_TSAN shows `Locked`'s hand-offs to it
# (Sources/SalvoIO/Locked.swift), SALVO_SANITIZED leaves jemalloc out of `salvo` (the
# sanitizer's allocator must be the only one). Own build folders keep `make test`'s intact.
TSAN_FLAGS := --sanitize=thread -Xswiftc -DSALVO_TSAN -Xswiftc -DSALVO_SANITIZED --scratch-path .build-tsan
test-tsan: deps
	$(SWIFT) build --build-tests $(TSAN_FLAGS)
	TSAN_OPTIONS=suppressions=$(CURDIR)/Tests/tsan.supp $(SWIFT) test --skip-build --disable-xctest --no-parallel $(SANITIZER_SKIP) $(TSAN_FLAGS)

# The whole suite under AddressSanitizer, leaks included. Both run one test at a time: under
# a sanitizer every test is several times slower, and run side by side on two cores they
# would overrun their time limits waiting for each other. Both skip the XCTest pass (Salvo's
# tests are all Swift Testing): XCTest's runner leaks its suite objects at exit.
ASAN_FLAGS := --sanitize=address -Xswiftc -DSALVO_SANITIZED --scratch-path .build-asan
test-asan: deps
	$(SWIFT) build --build-tests $(ASAN_FLAGS)
	LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/lsan.supp $(SWIFT) test --skip-build --disable-xctest --no-parallel $(SANITIZER_SKIP) $(ASAN_FLAGS)

fuzz: deps
	Tests/Fuzz/fuzz.sh --seconds $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The DocC catalogs of SalvoWire, SalvoEngine, SalvoCampaignFiles and SalvoBlackBerry
# (swift-docc-plugin) as one static site in DOCS_OUTPUT: a landing page linking the modules,
# every page a file, so that any static web server shows it without rewriting routes
# (DOCS_BASE_PATH: the sub-folder it is served from, e.g. salvo for https://HOST/salvo/).
# Any DocC warning fails it: a broken ``Symbol`` or <doc:Article> link, a parameter
# documented under the wrong name. Synthesized members (!=, hashValue) are left out; those
# the compiler writes without a source line (init(rawValue:)) show their protocol's
# documentation. Then scripts/docs-check.sh serves the site and renders pages in headless
# Chromium. DOCS_SCRATCH: another build folder, to leave .build alone; DOCS_EXTRA: more
# plugin options, e.g. --experimental-documentation-coverage.
DOCS_SCRATCH ?= .build
DOCS_OUTPUT ?= $(DOCS_SCRATCH)/docs
DOCS_BASE_PATH ?=
DOCS_EXTRA ?=
docs: deps
	@$(call install-missing,chromium)
	rm -rf $(DOCS_OUTPUT)
	$(SWIFT) package --scratch-path $(DOCS_SCRATCH) --allow-writing-to-directory $(DOCS_OUTPUT) \
	  generate-documentation --target SalvoWire --target SalvoEngine --target SalvoCampaignFiles --target SalvoBlackBerry \
	  --enable-experimental-combined-documentation --transform-for-static-hosting \
	  $(if $(DOCS_BASE_PATH),--hosting-base-path $(DOCS_BASE_PATH)) --output-path $(DOCS_OUTPUT) \
	  --warnings-as-errors --experimental-skip-synthesized-symbols --enable-inherited-docs $(DOCS_EXTRA)
	@# The site's root is DocC's page for no route ("can't be found"): it sends readers to the landing page.
	printf '<!doctype html>\n<meta charset="utf-8">\n<title>Salvo documentation</title>\n<meta http-equiv="refresh" content="0; url=documentation/">\n<a href="documentation/">Salvo documentation</a>\n' > $(DOCS_OUTPUT)/index.html
	scripts/docs-check.sh $(DOCS_OUTPUT) $(DOCS_BASE_PATH)

bench: deps
	cd Benchmarks && $(SWIFT) package --allow-writing-to-package-directory benchmark

clean:
	rm -rf .build .build-tsan .build-asan Benchmarks/.build Tests/Fuzz/.build
