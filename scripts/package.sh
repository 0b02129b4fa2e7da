#!/usr/bin/env bash
# Builds the release binaries once and packages them (issue #6):
#   1. `make`: swift build -c release --static-swift-stdlib into .build-release (never .build), stripped, plus
#      man pages, completions, units and docs, all in .build-release/dist;
#   2. the .deb: dpkg-buildpackage (debhelper compat 13, dh) on a tree of dist + packaging/debian, then lintian,
#      which must report no error (its full report is kept in lintian.txt);
#   3. the .rpm: rpmbuild on a tarball of the same dist and packaging/rpm/brokerd.spec.
# Both packages install through the Makefile's `install` target, so they carry the same binaries and files.
#
# Output, in .build-release/packages (made anew each run): brokerd_<v>-1_<arch>.deb, brokerd-<v>-1.<arch>.rpm,
# lintian.txt, build-times.txt. Needs scripts/install-deps.sh's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/.build-release/packages
work=$root/.build-release/package-work
rm -rf "$out" "$work"
mkdir -p "$out" "$work"

# The packages carry the commit's time, not the build's (dpkg-buildpackage, man pages, the rpm source tarball).
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

started=$(date +%s)
make --no-print-directory build
built=$(date +%s)
dist=$root/.build-release/dist
version=$("$dist/bin/brokerd" --version)
echo "package.sh: brokerd $version built in $((built - started)) s"

# --- .deb ---------------------------------------------------------------------------------------------------
debtree=$work/deb/brokerd-$version
mkdir -p "$debtree"
cp -a "$dist/." "$debtree/"
cp -a packaging/debian "$debtree/debian"
# The changelog names the version the binaries report, whatever packaging/debian/changelog's top entry says.
sed -i "1s/^brokerd ([^)]*)/brokerd ($version-1)/" "$debtree/debian/changelog"
(cd "$debtree" && dpkg-buildpackage -b -us -uc) > "$work/dpkg-buildpackage.log" 2>&1 || {
    tail -n 60 "$work/dpkg-buildpackage.log" >&2
    echo "package.sh: dpkg-buildpackage failed (log: $work/dpkg-buildpackage.log)" >&2
    exit 1
}
arch=$(dpkg --print-architecture)
deb=brokerd_${version}-1_${arch}.deb
cp "$work/deb/$deb" "$out/"
debbed=$(date +%s)

# lintian: errors fail the build; warnings and info are listed in lintian.txt (docs/admin.md, "Installing from packages", explains the ones kept).
# --allow-root: CI runs as root; lintian only reads the package.
changes=$work/deb/brokerd_${version}-1_${arch}.changes
lintian_status=0
lintian --allow-root --display-level '>=pedantic' --fail-on error "$changes" > "$out/lintian.txt" 2>&1 \
    || lintian_status=$?
if [ "$lintian_status" -ne 0 ] || grep -q '^E: ' "$out/lintian.txt"; then
    cat "$out/lintian.txt" >&2
    echo "package.sh: lintian reported errors (exit status $lintian_status)" >&2
    exit 1
fi
echo "package.sh: lintian: $(grep -c '^E: ' "$out/lintian.txt" || true) errors, $(grep -c '^W: ' "$out/lintian.txt" || true) warnings"
linted=$(date +%s)

# --- .rpm ---------------------------------------------------------------------------------------------------
rpmtop=$work/rpm
mkdir -p "$rpmtop/SOURCES"
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    -C "$work/deb" --exclude="brokerd-$version/debian" -czf "$rpmtop/SOURCES/brokerd-$version.tar.gz" "brokerd-$version"
rpm_args=(--define "_topdir $rpmtop" --define "brokerd_version $version")
# Debian's /usr/lib/rpm/brp-compress says #!/bin/sh but needs bash (`read -d`): under dash it fails and the man
# pages stay uncompressed, unlike on an RPM distribution. Run it with bash.
if [ -r /etc/debian_version ]; then
    rpm_args+=(--define "__brp_compress /bin/bash %{_rpmconfigdir}/brp-compress %{?_prefix}")
fi
# Debian's rpm has no systemd-rpm-macros: supply the user-unit macros the spec uses.
if [ -z "$(rpm --eval '%{?_userunitdir}')" ]; then
    rpm_args+=(--load "$root/packaging/rpm/macros.systemd-fallback")
fi
# --nodeps: the BuildRequires (systemd-rpm-macros, make) are Fedora package names, unknown to rpm's empty database
# here; make is present and the macros were just supplied.
rpmbuild -bb --nodeps "${rpm_args[@]}" packaging/rpm/brokerd.spec > "$work/rpmbuild.log" 2>&1 || {
    tail -n 60 "$work/rpmbuild.log" >&2
    echo "package.sh: rpmbuild failed (log: $work/rpmbuild.log)" >&2
    exit 1
}
cp "$rpmtop"/RPMS/*/brokerd-"$version"-1*.rpm "$out/"

finished=$(date +%s)
{
    echo "release build (make): $((built - started)) s"
    echo ".deb (dpkg-buildpackage): $((debbed - built)) s"
    echo "lintian: $((linted - debbed)) s"
    echo ".rpm (rpmbuild): $((finished - linted)) s"
} > "$out/build-times.txt"
echo "package.sh: packages in $out:"
(cd "$out" && ls -l ./*.deb ./*.rpm)
