#!/usr/bin/env bash
# kill -9 during cache writes, many rounds (issue #13; the test command runs 100):
#   bash scripts/crash-rounds.sh [ROUNDS]     # default 1000, about 90 s on the 2-core machine
# Each round starts brokerd, checks that the last acknowledged import is there and nothing was moved aside, imports
# generation after generation, and SIGKILLs it at a random moment (CrashSafetyTests).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests
BROKERD_CRASH_ROUNDS=${1:-1000} swift test --skip-build --disable-swift-testing --filter CrashSafetyTests
