#!/usr/bin/env bash
# Sets up and runs the whole test suite: build dependencies, the test identity provider's Python venv
# (django-oauth-toolkit, Tests/idp), the release packages (.deb, .rpm), the systemd unit check, then every XCTest
# (unit tests; integration tests that drive the real brokerd binary against the real test IdP; packaging tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash Tests/idp/setup.sh .build/idp-venv
export BROKERD_IDP_PYTHON="$PWD/.build/idp-venv/bin/python"
# The real msal-python + pymsalruntime for the D-Bus front end's tests (x86_64 wheels only: elsewhere those tests skip).
if bash Tests/idp/setup.sh .build/msal-venv Tests/dbus/requirements.txt; then
    export BROKERD_MSAL_PYTHON="$PWD/.build/msal-venv/bin/python"
else
    echo "test.sh: msal-python with pymsalruntime could not be installed: the real-client D-Bus tests will be skipped" >&2
fi

# The release binaries, built once (.build-release, static Swift runtime), and the .deb and .rpm made from them;
# PackagingTests install the .deb for real and compare the .rpm with it.
bash scripts/package.sh
export BROKERD_PACKAGES_DIR="$PWD/.build-release/packages"

# A smoke run of the whole-system benchmark on those release binaries (about two minutes): it fails when a figure
# cannot be measured, not when a target is missed — CI machines are shared, so figures are read, not asserted.
bash scripts/bench.sh --quick

bash scripts/fuzz.sh --seconds 30  # libFuzzer on the parsers of outside input, 30 s per target (Fuzz/, .build-fuzz)
swift build --build-tests
# systemd-analyze verify on the user units, with the freshly built brokerd as ExecStart=.
bash systemd/verify.sh "$(swift build --show-bin-path)/brokerd"
# XCTest only: the suite has no Swift Testing tests, and its "0 tests" summary line would be the last word.
swift test --skip-build --disable-swift-testing
