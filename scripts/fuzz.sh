#!/usr/bin/env bash
# Fuzzes brokerd's parsers of outside input with libFuzzer (the Swift toolchain's -sanitize=fuzzer), under
# AddressSanitizer: the JSON reader and Codable decoders, the JSON-RPC request line, the cache document, the
# identity provider's token / device-code / discovery / error answers, id_token and client_info, the TOML config,
# and the D-Bus front end's request checks.
#
#   bash scripts/fuzz.sh                   # each target for 1,000,000 executions (a few minutes each)
#   bash scripts/fuzz.sh --seconds 30      # each target for 30 s (the test suite's short run)
#   bash scripts/fuzz.sh --runs N          # each target for N executions
#   bash scripts/fuzz.sh --only rpc-line   # one target (repeatable); names as in Fuzz/Package.swift, no "fuzz-"
#
# The targets are a package of their own (Fuzz/), built from the parser modules' sources only, into .build-fuzz:
# the sanitizers never meet NIO or AsyncHTTPClient. Seeds are Fuzz/Corpus/<target>/ (read, never written); what a
# run learns goes to .build-fuzz/corpus/<target>/ and is reused by the next run. A crash leaves its input in
# .build-fuzz/crashes/<target>/, prints the reproduction command, and fails the script; so does a target that
# stops before its executions or time are done.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
root=$PWD
scratch=$root/.build-fuzz
runs=1000000
seconds=
only=()
while (($#)); do
    case $1 in
        --seconds) seconds=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --only) only+=("$2"); shift 2 ;;
        *) echo "usage: $0 [--seconds N | --runs N] [--only TARGET]..." >&2; exit 2 ;;
    esac
done
targets=(json-reader rpc-line cache-document oauth-responses id-token config dbus-request app-identity)
((${#only[@]})) && targets=("${only[@]}")

echo "fuzz.sh: building ${targets[*]} (release, -sanitize=fuzzer,address) in .build-fuzz"
mkdir -p "$scratch"
# The linker warns about every ASan helper symbol it cannot export; only a failure's output is worth showing.
if ! swift build -c release --package-path Fuzz --scratch-path "$scratch" \
        --sanitize=fuzzer --sanitize=address >"$scratch/build.log" 2>&1; then
    grep -v "Cannot export local symbol" "$scratch/build.log" >&2
    exit 1
fi
bin=$(swift build -c release --package-path Fuzz --scratch-path "$scratch" --show-bin-path)

failed=0
for target in "${targets[@]}"; do
    corpus=$scratch/corpus/$target crashes=$scratch/crashes/$target log=$scratch/$target.log
    mkdir -p "$corpus" "$crashes"
    limit=(-runs="$runs")
    [[ -n $seconds ]] && limit=(-max_total_time="$seconds")
    # -max_len: deep nesting needs only a few hundred bytes, and longer inputs slow every execution down.
    # -timeout: one input taking 10 s is a hang, reported like a crash. Leak detection is off: the Swift
    # runtime keeps its metadata caches for the life of the process, which LeakSanitizer would report.
    status=0
    # SWIFT_BACKTRACE off: libFuzzer and ASan report a crash; Swift's backtracer would only trip over ASan.
    SWIFT_BACKTRACE=enable=no "$bin/fuzz-$target" "${limit[@]}" -max_len=16384 -timeout=10 -rss_limit_mb=2048 -detect_leaks=0 \
        -print_final_stats=1 -artifact_prefix="$crashes/" "$corpus" "$root/Fuzz/Corpus/$target" >"$log" 2>&1 || status=$?
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if ((status != 0)) || [[ -z $executions ]] || { [[ -z $seconds ]] && ((executions < runs)); }; then
        failed=1
        echo "fuzz.sh: $target FAILED (exit $status, ${executions:-0} executions); last lines of $log:" >&2
        grep -m 3 "Fatal error\|ERROR: \(AddressSanitizer\|libFuzzer\)" "$log" >&2 || true
        grep -v "^#[0-9]" "$log" | tail -40 >&2
        for input in "$crashes"/*; do
            [[ -e $input ]] && echo "  reproduce: $bin/fuzz-$target $input" >&2
        done
    else
        echo "fuzz.sh: $target: $executions executions, 0 crashes"
    fi
done
exit $failed
