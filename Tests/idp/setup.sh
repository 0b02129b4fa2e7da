#!/usr/bin/env bash
# Creates (or refreshes) the Python venv that runs the test IdP, or one for another requirements file.
#   usage: Tests/idp/setup.sh VENV_DIR [REQUIREMENTS_FILE]
# Idempotent: when VENV_DIR already holds exactly requirements.txt (checked by a
# stamp file with its hash and the interpreter version) it returns at once.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ -z "$1" ]; then
    echo "usage: $0 VENV_DIR [REQUIREMENTS_FILE]" >&2
    exit 2
fi
VENV=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REQ=${2:-$HERE/requirements.txt}
PY=${PYTHON:-python3}
STAMP=$VENV/.idp-requirements.stamp

command -v "$PY" >/dev/null 2>&1 || { echo "setup.sh: $PY not found (install python3 >= 3.10)" >&2; exit 1; }
PYVER=$("$PY" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
WANT="$(sha256sum "$REQ" | cut -d' ' -f1) python-$PYVER"

up_to_date() {
    [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && "$VENV/bin/python" -c '' 2>/dev/null
}

if up_to_date; then
    exit 0
fi

# Serialise concurrent runs that share one venv.
mkdir -p "$(dirname "$VENV")"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$VENV.lock"
    flock 9
    if up_to_date; then exit 0; fi
fi

# python3 -m venv needs ensurepip, which Debian ships separately (python3-venv).
if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup.sh: installing python3-venv with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq python3-venv >/dev/null 2>&1 || {
            apt-get update -qq >/dev/null && apt-get install -y -qq python3-venv >/dev/null
        }
    else
        echo "setup.sh: '$PY -m venv' needs ensurepip: run 'sudo apt-get install python3-venv'" >&2
        exit 1
    fi
fi

if [ -e "$VENV" ] && [ ! -f "$VENV/pyvenv.cfg" ] && [ -n "$(ls -A "$VENV" 2>/dev/null)" ]; then
    echo "setup.sh: $VENV exists and is not a venv; refusing to touch it" >&2
    exit 1
fi

echo "setup.sh: creating venv at $VENV" >&2
rm -f "$STAMP"
"$PY" -m venv --clear "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    --requirement "$REQ"
[ $# -eq 2 ] || "$VENV/bin/python" -c 'import django, oauth2_provider, oauthlib, jwcrypto, cryptography'
echo "$WANT" > "$STAMP"
echo "setup.sh: venv ready" >&2
