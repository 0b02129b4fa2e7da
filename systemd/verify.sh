#!/bin/sh
# verify.sh: check systemd/brokerd.socket and systemd/brokerd.service with `systemd-analyze verify`, and that
# the D-Bus activation file com.microsoft.identity.broker1.service names the same bus name, unit and binary.
#
# Usage: systemd/verify.sh [BROKERD_BINARY]
#
# How and why it is run this way:
# - verify insists that ExecStart='s binary exists ("Command /usr/bin/brokerd is not executable"). The units
#   are therefore copied to a temporary directory and ExecStart='s binary is replaced with $1, else with
#   /usr/bin/brokerd when it is installed, else with /bin/true. Nothing else in the units is changed.
# - The units are user units, so they are verified with --user: %t, StateDirectory= and the other
#   specifiers then resolve as the user manager resolves them. verify does not talk to a running manager
#   (it loads the units into an offline test manager), so it works in a container without systemd as
#   PID 1 and as root. It does need $XDG_RUNTIME_DIR, though: without it --user fails with "Failed to lookup
#   RuntimeDirectory path: No such device or address". The script points XDG_RUNTIME_DIR at a private
#   temporary directory, so the result is the same in a desktop session, in CI and in a container.
# - --man=no: the man:brokerd(8) page named in Documentation= is not installed where the units are checked
#   (verify would fail with "Command 'man brokerd(8)' failed with code 16").
# - SYSTEMD_LOG_LEVEL is unset: a debug level inherited from the environment would print pages of
#   harmless messages and make the check fail.
# The check fails when verify exits non-zero or prints anything at all (warnings such as unknown keys
# only print, with exit status 0).
set -eu

here=$(cd "$(dirname "$0")" && pwd)

if [ $# -ge 1 ]; then
    binary=$1
elif [ -x /usr/bin/brokerd ]; then
    binary=/usr/bin/brokerd
else
    binary=/bin/true
fi
case $binary in
    /*) ;;
    *) binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary") ;;
esac
if [ ! -x "$binary" ]; then
    echo "verify.sh: $binary is not an executable file" >&2
    exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/brokerd-verify.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
mkdir -m 0700 "$work/units" "$work/runtime"

cp "$here/brokerd.socket" "$here/brokerd.service" "$work/units/"
# Keep any ExecStart= prefix (-, @, :, +, !) and the arguments; replace only the binary.
sed -i "s|^ExecStart=\([-@:+!]*\)[^[:space:]]*|ExecStart=\1$binary|" "$work/units/brokerd.service"
if ! grep -q "^ExecStart=[-@:+!]*$binary\( \|\$\)" "$work/units/brokerd.service"; then
    echo "verify.sh: could not rewrite ExecStart= in brokerd.service" >&2
    exit 2
fi

status=0
output=$(cd "$work/units" && env -u SYSTEMD_LOG_LEVEL XDG_RUNTIME_DIR="$work/runtime" \
    systemd-analyze verify --user --man=no "$work/units/brokerd.socket" "$work/units/brokerd.service" 2>&1) \
    || status=$?

if [ "$status" -ne 0 ] || [ -n "$output" ]; then
    [ -n "$output" ] && printf '%s\n' "$output" >&2
    echo "verify.sh: systemd-analyze verify failed (exit status $status, ExecStart binary $binary)" >&2
    exit 1
fi

# systemd-analyze does not read D-Bus service files: the bus would activate a name the unit does not own, or
# another unit, without any warning. Compare them line by line.
activation=$here/com.microsoft.identity.broker1.service
bus_name=$(sed -n 's/^BusName=//p' "$here/brokerd.service")
exec_start=$(sed -n 's/^ExecStart=[-@:+!]*\([^[:space:]]*\).*/\1/p' "$here/brokerd.service")
for line in "[D-BUS Service]" "Name=$bus_name" "Exec=$exec_start" "SystemdService=brokerd.service"; do
    if [ -z "$bus_name" ] || ! grep -qxF "$line" "$activation"; then
        echo "verify.sh: $activation lacks '$line' (brokerd.service: BusName=$bus_name, ExecStart=$exec_start)" >&2
        exit 1
    fi
done
echo "verify.sh: brokerd.socket and brokerd.service verify cleanly (--user, ExecStart binary $binary);" \
    "com.microsoft.identity.broker1.service activates brokerd.service as $bus_name"
