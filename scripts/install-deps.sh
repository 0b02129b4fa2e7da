#!/usr/bin/env bash
# Installs the Debian packages brokerd needs to build and to run its tests (Debian 12, Swift already installed):
#   libsystemd-dev  the CSystemd system library (sd_notify, sd_listen_fds, sd_journal_sendv)
#   libsqlite3-dev  the CSQLite system library: the cache database (one row per entry, WAL, transactions)
#   systemd         systemd-socket-activate and systemd-analyze (socket-activation test, unit verification)
#   util-linux      setpriv (the peer-credential tests run a client as another user)
#   python3-venv    the virtual environment of the test identity provider (Tests/idp)
#   curl            the tests drive the test identity providers' control endpoints with it
#   python3, openssl  the Entra emulator (Tests/entra: Python standard library, certificates made with openssl)
#   make, binutils  the release build (Makefile; strip) and the packaging tests (readelf)
#   debhelper, dpkg-dev, lintian  the .deb (dpkg-buildpackage with dh, compat 13) and its check (scripts/package.sh)
#   rpm             rpmbuild for the .rpm, and rpm -qp to list it
#   man-db          man -l renders the installed man pages (packaging tests)
#   chromium, chromium-driver, python3-selenium  the one sign-in in a real browser (RealBrowserTests)
#   dbus-daemon     a private session bus for the D-Bus front end's tests (busctl, from systemd, is the client)
#   python3-dbus    libdbus from Python: a D-Bus client for requests larger than busctl's command line carries
#   gnome-keyring, libsecret-1-0, libwebkit2gtk-4.1-0, libjavascriptcoregtk-4.1-0, libgtk-3-0, libsoup-3.0-0
#                   what pymsalruntime's libmsalruntime links, and the Secret Service it keeps its own cache in
#                   (the real msal-python client of the D-Bus tests)
#   python3-gi, gir1.2-glib-2.0  the desktop notification server the headless sign-in tests put on their private bus
#   libsecret-tools secret-tool: the key store tests read brokerd's key item in gnome-keyring with a real client
#   bubblewrap, xdg-dbus-proxy  Flatpak's sandbox and bus filter: the app-identity tests run their clients in them
#   libqrencode-dev the CQRencode system library: brokerctl shows a device-code sign-in's address as a QR code
#   zbar-tools      zbarimg: the QR tests decode what brokerctl draws with a real decoder
#   iproute2        ip: the offline tests and bench take the only link of a network namespace (unshare -rn) down and up
# Only what is missing is installed; `apt-get update` runs only then.
set -euo pipefail

packages=(
    libsystemd-dev libsqlite3-dev systemd util-linux python3 python3-venv curl openssl make binutils
    debhelper dpkg-dev lintian rpm man-db
    chromium chromium-driver python3-selenium
    dbus-daemon gnome-keyring libsecret-1-0 libwebkit2gtk-4.1-0 libjavascriptcoregtk-4.1-0 libgtk-3-0 libsoup-3.0-0
    python3-gi gir1.2-glib-2.0 libsecret-tools python3-dbus bubblewrap xdg-dbus-proxy
    libqrencode-dev zbar-tools iproute2
)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then sudo=(); elif command -v sudo >/dev/null; then sudo=(sudo); else
    echo "install-deps: missing packages ${missing[*]}; run as root or install them" >&2
    exit 1
fi
echo "install-deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
