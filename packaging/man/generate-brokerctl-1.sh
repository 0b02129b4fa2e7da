#!/bin/sh
# generate-brokerctl-1.sh BROKERCTL SCRATCH: writes brokerctl(1) (mdoc) to stdout.
#
# The page is generated from brokerctl's own command tree by swift-argument-parser's generate-manual tool, so
# it never drifts from `brokerctl --help`; the ENVIRONMENT, FILES and SEE ALSO sections, which --help does not
# have, are added here.
#
# The tool is built from the swift-argument-parser checkout SwiftPM already resolved for the release build
# (SCRATCH/checkouts), with a scratch path of its own, and run on the given binary. The package's
# `swift package plugin generate-manual` runs the same tool, but it first rebuilds every product in its own
# configuration (without --static-swift-stdlib, relinking the release binaries we ship), so it is not used.
# SOURCE_DATE_EPOCH, when set, dates the page (reproducible packages).
set -eu

brokerctl=$1
scratch=$2
checkout=$scratch/checkouts/swift-argument-parser
if [ ! -f "$checkout/Tools/generate-manual/GenerateManual.swift" ]; then
    echo "generate-brokerctl-1.sh: no swift-argument-parser checkout in $scratch/checkouts" >&2
    exit 1
fi
swift build --package-path "$checkout" --scratch-path "$scratch/generate-manual" --product generate-manual >&2
tool=$(swift build --package-path "$checkout" --scratch-path "$scratch/generate-manual" --show-bin-path)/generate-manual

date=$(date -u ${SOURCE_DATE_EPOCH:+-d "@$SOURCE_DATE_EPOCH"} +%Y-%m-%d)
page=$("$tool" "$brokerctl" --section 1 --date "$date" --output-directory -)

# The additions go before EXIT STATUS (ENVIRONMENT, FILES) and at the end (SEE ALSO), in mdoc's section order.
printf '%s\n' "$page" | awk '
    /^\.Sh "EXIT STATUS"/ && !done {
        print ".Sh ENVIRONMENT"
        print ".Bl -tag -width 6n"
        print ".It Ev BROKERD_SOCKET"
        print "The socket of brokerd, when --socket is not given."
        print ".It Ev XDG_RUNTIME_DIR"
        print "The directory of the default socket,"
        print ".Pa $XDG_RUNTIME_DIR/brokerd/brokerd.sock ."
        print ".It Ev XDG_CONFIG_HOME"
        print "The directory of the configuration file with the profiles used by"
        print ".Cm login"
        print "and"
        print ".Cm token ."
        print ".El"
        print ".Sh FILES"
        print ".Bl -tag -width 6n"
        print ".It Pa ~/.config/brokerd/config.toml"
        print "The configuration file, shared with"
        print ".Xr brokerd 8 ;"
        print "an example is in"
        print ".Pa /usr/share/doc/brokerd/config.toml.example ."
        print ".El"
        done = 1
    }
    { print }
    END {
        print ".Sh SEE ALSO"
        print ".Xr brokerd 8 ,"
        print ".Xr systemctl 1"
    }'
