#!/usr/bin/env bash
# Sets up and runs brokerd in the foreground from this checkout: installs the build dependencies, builds the
# release binaries and starts the daemon on the default socket ($XDG_RUNTIME_DIR/brokerd/brokerd.sock).
# Arguments are passed to brokerd (see `brokerd --help`); try `.build/release/brokerctl status` in another terminal.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
swift build -c release --product brokerctl
swift build -c release --product brokerd
exec .build/release/brokerd "$@"
