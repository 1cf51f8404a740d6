#!/usr/bin/env bash
# openapi-spec-validator (and the jsonschema and PyYAML it brings), for the test that
# validates `salvo serve`'s OpenAPI document (Tests/SalvoServeTests/OpenAPITests.swift), in
# a virtualenv from PyPI (scripts/python-venv.sh). The test only looks for the result (it
# never goes online); without it, that test is skipped with the reason, and the one that
# checks real answers against the document uses the system's python3 when it has jsonschema
# and PyYAML.
#
#   scripts/openapi-python.sh [DIR]     (default: .build/openapi-python)
set -euo pipefail
cd "$(dirname "$0")/.."
# Pinned: what the test asserts is this version's reading of OpenAPI 3.1.
exec scripts/python-venv.sh "${1:-.build/openapi-python}" "the OpenAPI document's validation will be skipped" \
    "openapi_spec_validator jsonschema referencing yaml" openapi-spec-validator==0.9.0
