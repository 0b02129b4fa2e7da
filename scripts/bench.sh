#!/usr/bin/env bash
# The whole-system benchmark: one run, one table, every figure measured in this run and every ratio taken against
# a baseline measured in the same run (machine noise moves both sides):
#   1. a C line-echo server on AF_UNIX driven by our C load client with brokerd's exact request line: the floor;
#   2. brokerd's acquireTokenSilently cache hit, the same client and line, at 1 account and at 10,000 accounts /
#      100,000 access tokens (1 client and 64 concurrent clients; the 64-client rate in three rounds, each after a
#      run of the echo server, against whose median it is taken; the single-client p50 against msal-python in three
#      rounds, each after a msal-python loop on the same core, median against median);
#   2b. the same with varied requests, where no memo of the last request can answer: each request is a random line
#      of make_cache.py's OUT.json.varied.jsonl (an account among all of the document's and one of its scope sets,
#      never the same line twice in a row; the load client's --requests), at 1 account and at the big size, measured
#      as in 2 (1 client, the 64-client rounds, the msal-python rounds with msal_silent.py --varied on the same
#      lines) against the echo server driven with the same varied lines;
#   3. msal-python's in-process acquire_token_silent on the same cache documents (what an app does without brokerd);
#   4. whole processes: brokerctl token vs brokerctl --help, and a Python process doing msal's silent call;
#   5. cold start under systemd-socket-activate with a 1,000-account cache;
#   6. scale at 100k tokens: import time, memory idle and loaded, start-up time with the cache, a durable change.
#   7. the audit: `brokerctl log --app` over a filled apps.db;
#   8. D-Bus: broker1's acquireTokenSilently as pymsalruntime calls it (scripts/bench/dbus.sh), against an sd-bus echo
#      service of the same method shape replying with brokerd's answer, repeated and varied, on a private bus.
#   9. offline (scripts/bench/offline.sh): cache hits with the IdP unreachable, fail-fast errors, refresh on return.
# It prints the machine and the table, writes the table to .build-bench/bench-results.md (markdown, for
# docs/performance.md), and exits 1 when a figure could not be measured — not when a target is missed (that is a FAIL row).
#
#   bash scripts/bench.sh            # full run, several minutes
#   bash scripts/bench.sh --quick    # about two minutes: 1,000 accounts / 10,000 tokens, fewer iterations
#   bash scripts/bench.sh --bin-dir DIR   # measure the brokerd/brokerctl in DIR (e.g. another commit's build)
#
# The release binaries are .build-release's (built with the Makefile's command when missing, ~9 min clean; an
# existing build is reused as it is, so rebuild first to measure new code). Everything else lives in
# .build-bench: the C programs, the venv with msal (pip, newest 1.x), the generated cache documents.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
root=$PWD
bench=$root/scripts/bench
out=$root/.build-bench
quick=0
bin_dir=
while (($#)); do
    case $1 in
        --quick) quick=1 ;;
        --bin-dir) bin_dir=$(cd "${2:?--bin-dir needs a directory}" && pwd); shift ;;
        -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
        *) echo "bench.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
if ((quick)); then
    big_accounts=1000 seq=2000 warm=200 secs=1 msal_calls=2000 runs=10 py_runs=5 cold_runs=3 removes=10 audit_rows=100000
else
    big_accounts=10000 seq=20000 warm=2000 secs=3 msal_calls=20000 runs=30 py_runs=30 cold_runs=5 removes=20 audit_rows=1000000
fi
per_account=10
started=$SECONDS

# Sockets want short paths (108 bytes), hence /tmp; nothing here survives the run.
mkdir -p "$out"
work=$(mktemp -d /tmp/brokerd-bench.XXXXXX)
results=$work/results.env
daemons=()
cleanup() {
    local pid
    for pid in "${daemons[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${daemons[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
# Nothing of the user's own brokerd, configuration or state is touched (nor the keyring: no session bus, so
# key_store = "auto" takes a key file in the bench's state directory).
unset BROKERD_SOCKET DBUS_SESSION_BUS_ADDRESS
export XDG_CONFIG_HOME=$work/xdg-config XDG_STATE_HOME=$work/xdg-state XDG_RUNTIME_DIR=$work/xdg-run
mkdir -p "$XDG_CONFIG_HOME" "$XDG_STATE_HOME" "$XDG_RUNTIME_DIR"

record() { echo "$1=$2" >>"$results"; }
note() { echo "note=$*" >>"$results"; echo "bench.sh: $*" >&2; }
record_all() { local kv; for kv in $2; do record "$1_${kv%%=*}" "${kv#*=}"; done; }  # PREFIX "k=v k=v"
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }  # seconds since $EPOCHREALTIME $1
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }
meta() { "$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1.meta.json" "$2"; }
step() { printf '[%3d s] %s\n' $((SECONDS - started)) "$*" >&2; }

# --- binaries, C programs, venv, documents ----------------------------------------------------------------------
if [[ -z $bin_dir ]]; then
    build=(swift build -c release --static-swift-stdlib --scratch-path .build-release --toolset packaging/release.toolset.json)
    bin_dir=$("${build[@]}" --show-bin-path)
    if [[ ! -x $bin_dir/brokerd || ! -x $bin_dir/brokerctl ]]; then
        step "building the release binaries (${build[*]})"
        "${build[@]}" >&2
    fi
fi
brokerd=$bin_dir/brokerd brokerctl=$bin_dir/brokerctl
[[ -x $brokerd && -x $brokerctl ]] || { echo "bench.sh: no brokerd/brokerctl in $bin_dir" >&2; exit 1; }
for program in echo_server load_client; do
    cc -O2 -pthread -Wall -o "$out/$program" "$bench/$program.c"
done
load=$out/load_client
py=$out/venv/bin/python
if [[ ! -x $py ]]; then
    step "making the venv $out/venv"
    python3 -m venv "$out/venv"
fi
if ((!quick)) || ! "$py" -c 'import msal' 2>/dev/null; then
    step "pip install msal (newest 1.x)"
    "$py" -m pip install --quiet --disable-pip-version-check --upgrade 'msal>=1,<2' >&2
fi
# Documents are cached between runs, but their tokens expire a day after they were made: remade after 12 hours.
# Each comes with its varied requests (DOC.varied.jsonl), written from the document when missing.
document() {  # ACCOUNTS → path
    local doc=$out/cache-${1}x$per_account.json
    if [[ ! -s $doc.meta.json || $bench/make_cache.py -nt $doc || -n $(find "$doc" -mmin +720) ]]; then
        step "making $doc"
        "$py" "$bench/make_cache.py" "$1" "$per_account" "$doc"
    elif [[ ! -s $doc.varied.jsonl ]]; then
        step "making $doc.varied.jsonl"
        "$py" "$bench/make_cache.py" "$1" "$per_account" "$doc" --varied-only
    fi
    echo "$doc"
}
doc_one=$(document 1)
doc_big=$(document "$big_accounts")
doc_cold=$(document 1000)
silent_request() {  # DOCUMENT → request file: the exact line the load client, the echo server and brokerd get
    local file=$work/request-$(basename "$1").json
    printf '{"jsonrpc":"2.0","id":1,"method":"acquireTokenSilently","params":{"clientId":"%s","authority":"%s","scopes":["%s"],"account":{"homeAccountId":"%s"}}}\n' \
        "$(meta "$1" clientId)" "$(meta "$1" authority)" "$(meta "$1" scope)" "$(meta "$1" homeAccountId)" >"$file"
    echo "$file"
}
req_one=$(silent_request "$doc_one") req_big=$(silent_request "$doc_big") req_cold=$(silent_request "$doc_cold")
varied_one=$doc_one.varied.jsonl varied_big=$doc_big.varied.jsonl  # the varied mode's requests (make_cache.py)
# request_args REQUEST → req_args: the load client's arguments for it, a request file as it is (the repeated mode)
# or, for a .jsonl of varied requests, --requests FILE (the varied mode). Callers declare req_args local.
request_args() {
    if [[ $1 == *.jsonl ]]; then req_args=(--requests "$1"); else req_args=("$1"); fi
}
version_request=$work/version.json
echo '{"jsonrpc":"2.0","id":1,"method":"getBrokerVersion"}' >"$version_request"
status_request=$work/status.json
echo '{"jsonrpc":"2.0","id":1,"method":"getStatus"}' >"$status_request"

record machine "$(hostname), nproc $(nproc)"
record cpu "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
record memory "$(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
record kernel "$(uname -srm), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
record date "$(date -u '+%Y-%m-%d %H:%M UTC')"
binaries="$bin_dir: brokerd $("$brokerd" --version 2>/dev/null || echo '?'), built $(date -u -r "$brokerd" '+%Y-%m-%d %H:%M UTC')"
if [[ $bin_dir == "$root"/.build-release/* ]]; then  # which sources it was built from is not recorded: say what is here
    binaries+="; HEAD $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    git diff --quiet HEAD -- Sources Package.swift 2>/dev/null || binaries+=" (Sources/Package.swift modified)"
fi
record binaries "$binaries"
record mode "$( ((quick)) && echo quick || echo full): $seq sequential requests after $warm warm-up, 64 clients for $secs s, $msal_calls msal calls"
record big_accounts "$big_accounts"
record big_tokens "$((big_accounts * per_account))"
record procs_runs "$runs"
record py_runs "$py_runs"
record cold_runs "$cold_runs"
record remove_count "$removes"
record varied_lines "$(wc -l <"$varied_one")"

# --- daemons ----------------------------------------------------------------------------------------------------
conf=$work/brokerd.toml
# The default log level (info): what an installed brokerd pays for its request log is part of the figure.
cat >"$conf" <<'EOF'
background_refresh = false
allow_root = true
EOF
# The bench may run as root (CI); allow_root lets root's own client in, as the daemon is root's too.

# start_daemon NAME STATE_DIR REQUEST [TIMEOUT]: starts brokerd, waits until REQUEST is answered; sets $pid, $sock
# and $start_ms (spawn → first answer).
start_daemon() {
    sock=$work/$1.sock
    local t0=$EPOCHREALTIME answer
    "$brokerd" --socket "$sock" --state-dir "$2" --config "$conf" >>"$work/$1.log" 2>&1 &
    pid=$!
    daemons+=("$pid")
    if ! answer=$("$py" "$bench/timing.py" answer "$sock" "$3" --since "$t0" --timeout "${4:-30}"); then
        tail -n 20 "$work/$1.log" >&2
        return 1
    fi
    start_ms=$(field "$answer" ms)
}
stop_daemon() {  # PID: SIGTERM (brokerd flushes the cache), SIGKILL after 60 s
    local i
    if kill -TERM "$1" 2>/dev/null; then
        for ((i = 0; i < 600; i++)); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$1" 2>/dev/null || true
    fi
    wait "$1" 2>/dev/null || true
    local left=() p
    for p in "${daemons[@]}"; do [[ $p == "$1" ]] || left+=("$p"); done
    daemons=("${left[@]}")  # cleanup() must never signal a pid that may have been reused
}
rss_mib() { awk -v k="$2:" '$1 == k { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }  # PID VmRSS|VmHWM
# load_runs PREFIX PID SOCKET REQUEST EXPECT...: the sequential runs and the 64-client run of the load client.
# A single client's round trip depends on where the scheduler puts the two ends: on one core it is a direct switch,
# across cores it is a wake-up of another CPU (several times slower on a VM). Left alone, the placement differs from
# run to run and from server to server, so the sequential run is made twice with the server pinned to the first CPU
# this script may use: the client on that CPU (PREFIX1) and on the second one (PREFIX1x). The 64-client run has every
# CPU. Without taskset, or with one CPU, the runs are unpinned (PREFIX1) and the cross-core row is left out.
# REQUEST is a request file, or a .jsonl of varied requests (request_args): the varied rows' PREFIX ends in V.
allowed_cpus=$(taskset -pc $$ 2>/dev/null | sed 's/.*: //' | tr ',' '\n' |
    awk -F- '{ hi = ($2 == "") ? $1 : $2; for (c = $1; c <= hi; c++) print c }' | head -n 2 | tr '\n' ' ')
read -r first_cpu second_cpu <<<"$allowed_cpus" || true
all_cpus=$(taskset -pc $$ 2>/dev/null | sed 's/.*: //')
if [[ -z $second_cpu ]]; then
    record cross_core unavailable
    note "fewer than two CPUs to pin to (taskset -pc: ${all_cpus:-none}): single-client runs unpinned, no cross-core run"
fi
load_runs() {
    local prefix=$1 server=$2 sock=$3 request=$4 figures tag pin req_args
    shift 4
    request_args "$request"
    [[ -n $second_cpu ]] && taskset -a -p -c "$first_cpu" "$server" >/dev/null
    for tag in 1 1x; do
        pin=()
        if [[ -n $second_cpu ]]; then
            pin=(taskset -c "$first_cpu")
            [[ $tag == 1x ]] && pin=(taskset -c "$second_cpu")
        elif [[ $tag == 1x ]]; then
            continue
        fi
        if figures=$("${pin[@]}" "$load" "$sock" "${req_args[@]}" --count "$seq" --warmup "$warm" "$@" 2>"$work/load.err"); then
            record_all "$prefix$tag" "$figures"
        else
            note "$prefix, 1 client ($tag): not measured ($(tail -n 2 "$work/load.err" | tr '\n' ' '))"
        fi
    done
    case $prefix in one | big | oneV | bigV) msal_rounds "$prefix" "$sock" "$request" "$@" ;; esac
    [[ -n $second_cpu ]] && taskset -a -p -c "$all_cpus" "$server" >/dev/null
    case $prefix in
        one | big | oneV | bigV) alternating_rounds "$prefix" "$sock" "$request" "$@" ;;
        *)
            if figures=$("$load" "$sock" "${req_args[@]}" --clients 64 --duration "$secs" --warmup "$warm" "$@" 2>"$work/load.err"); then
                record_all "${prefix}64" "$figures"
            else
                note "$prefix, 64 clients: not measured ($(tail -n 2 "$work/load.err" | tr '\n' ' '))"
            fi
            ;;
    esac
}
# brokerd's 64-client rate is compared with an echo server's measured alongside it, not only with section 1's: on
# this VM either rate drifts by a fifth from one minute to the next (docs/performance.md). Three rounds, each an
# echo run (same request line, its own socket) just before a brokerd run; the figures are each side's median
# (PREFIX64_rps, PREFIX64echo_rps, PREFIX64_p50_us), and the rounds are recorded as they were (PREFIX64_rounds).
# With varied requests the echo server is driven with the same lines (the load client's --requests --echo).
alternating_rounds() {  # PREFIX SOCKET REQUEST EXPECT...
    local prefix=$1 sock=$2 request=$3 round figures side rates=() echo_rates=() p50s=() rounds="" req_args
    shift 3
    request_args "$request"
    "$out/echo_server" "$work/echo-side.sock" &
    side=$!
    daemons+=("$side")
    "$py" "$bench/timing.py" answer "$work/echo-side.sock" "$req_one" --since "$EPOCHREALTIME" --expect acquireTokenSilently >/dev/null
    for round in 1 2 3; do
        if figures=$("$load" "$work/echo-side.sock" "${req_args[@]}" --clients 64 --duration "$secs" --warmup "$warm" \
            --echo 2>"$work/load.err"); then
            echo_rates+=("$(field "$figures" rps)")
        else
            note "$prefix, echo 64 clients, round $round: not measured ($(tail -n 2 "$work/load.err" | tr '\n' ' '))"
        fi
        if figures=$("$load" "$sock" "${req_args[@]}" --clients 64 --duration "$secs" --warmup "$warm" "$@" 2>"$work/load.err"); then
            rates+=("$(field "$figures" rps)")
            p50s+=("$(field "$figures" p50_us)")
            rounds+="${rounds:+, }$(awk -v b="${rates[-1]}" -v e="${echo_rates[-1]:-0}" \
                'BEGIN { printf "%.1fk / %.1fk", b / 1000, e / 1000 }')"
        else
            note "$prefix, 64 clients, round $round: not measured ($(tail -n 2 "$work/load.err" | tr '\n' ' '))"
        fi
    done
    stop_daemon "$side"
    ((${#rates[@]})) && record "${prefix}64_rps" "$(median "${rates[@]}")" && record "${prefix}64_p50_us" "$(median "${p50s[@]}")"
    ((${#echo_rates[@]})) && record "${prefix}64echo_rps" "$(median "${echo_rates[@]}")"
    record "${prefix}64_rounds" "$rounds"
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
# brokerd's single-client p50 is compared with msal-python's in-process p50 the same way: three rounds, each a
# msal-python loop (one process, which loaded the same document once, answering a line on its stdin with a round)
# just before a brokerd run, both on the first CPU with brokerd pinned there too. Each side's median is the figure
# (PREFIXalt_p50_us, msalPREFIXalt_p50_us); the rounds are recorded as they were (PREFIXalt_rounds). Measured
# minutes apart, as section 3 and section 2 are, either p50 can move by a fifth (docs/performance.md). The big
# rounds also run the 1-account daemon (kept for this), so that 10,000 is compared with 1 in the same rounds too
# (bigone_p50_us). With varied requests (oneV, bigV) msal-python makes the same calls (msal_silent.py --varied).
msal_rounds() {  # PREFIX SOCKET REQUEST EXPECT...
    local prefix=$1 sock=$2 request=$3 doc=$doc_one round figures to_msal pin=() ours=() theirs=() ones=() rounds=""
    local with_one=0 req_args varied=()
    shift 3
    request_args "$request"
    [[ $request == *.jsonl ]] && varied=(--varied "$request")
    [[ $prefix == big* ]] && doc=$doc_big
    [[ $prefix == big && -n ${one_pid:-} ]] && with_one=1
    [[ -n $second_cpu ]] && pin=(taskset -c "$first_cpu")
    ((with_one)) && [[ -n $second_cpu ]] && taskset -a -p -c "$first_cpu" "$one_pid" >/dev/null
    coproc msal_side { "${pin[@]}" "$py" "$bench/msal_silent.py" "$doc" "$doc.meta.json" --count "$msal_calls" \
        --warmup "$warm" --rounds-on-stdin "${varied[@]}" 2>"$work/msal-rounds.err"; }
    to_msal=${msal_side[1]}
    for round in 1 2 3; do
        echo round >&"$to_msal"
        if ! read -r figures <&"${msal_side[0]}" || [[ $(field "$figures" errors) != 0 || $(field "$figures" http_calls) != 0 ]]; then
            note "$prefix, msal-python round $round: not measured ($(tail -n 2 "$work/msal-rounds.err" | tr '\n' ' '))"
            break
        fi
        theirs+=("$(field "$figures" p50_us)")
        if figures=$("${pin[@]}" "$load" "$sock" "${req_args[@]}" --count "$seq" --warmup "$warm" "$@" 2>"$work/load.err"); then
            ours+=("$(field "$figures" p50_us)")
            rounds+="${rounds:+, }${ours[-1]} / ${theirs[-1]}"
        else
            note "$prefix, 1 client, round $round: not measured ($(tail -n 2 "$work/load.err" | tr '\n' ' '))"
        fi
        ((with_one)) || continue
        if figures=$("${pin[@]}" "$load" "$one_sock" "$req_one" --count "$seq" --warmup "$warm" "${one_expect[@]}" \
            2>"$work/load.err"); then
            ones+=("$(field "$figures" p50_us)")
            rounds+=" / ${ones[-1]}"
        else
            note "1 account, 1 client, big round $round: not measured ($(tail -n 2 "$work/load.err" | tr '\n' ' '))"
        fi
    done
    ((with_one)) && [[ -n $second_cpu ]] && taskset -a -p -c "$all_cpus" "$one_pid" >/dev/null
    ((${#ones[@]})) && record bigone_p50_us "$(median "${ones[@]}")"
    exec {to_msal}>&-
    wait "$msal_side_PID" 2>/dev/null || true
    ((${#ours[@]})) && record "${prefix}alt_p50_us" "$(median "${ours[@]}")"
    ((${#theirs[@]})) && record "msal${prefix}alt_p50_us" "$(median "${theirs[@]}")"
    record "${prefix}alt_rounds" "$rounds µs"
}
import_how="brokerctl import FILE"
import_doc() {  # SOCKET FILE
    "$brokerctl" import "$2" --socket "$1" >/dev/null
}
record import_how "$import_how"

# --- 1. the echo baseline ---------------------------------------------------------------------------------------
step "echo baseline"
"$out/echo_server" "$work/echo.sock" &
daemons+=("$!")
echo_pid=$!
"$py" "$bench/timing.py" answer "$work/echo.sock" "$req_one" --since "$EPOCHREALTIME" --expect acquireTokenSilently >/dev/null
load_runs echo "$echo_pid" "$work/echo.sock" "$req_one" --echo
# The varied mode's baseline: the same server driven with each document's varied lines (2b).
load_runs echoVone "$echo_pid" "$work/echo.sock" "$varied_one" --echo
load_runs echoVbig "$echo_pid" "$work/echo.sock" "$varied_big" --echo
stop_daemon "$echo_pid"

# --- 2 (1 account), 4 and idle memory: a fresh daemon -----------------------------------------------------------
step "brokerd, 1 account"
token_one=$(meta "$doc_one" accessToken)
expect_cache=(--expect '"result"' --expect '"source":"cache"')
if start_daemon one "$work/state-one" "$version_request"; then
    sleep 0.5  # idle: let start-up work settle
    record rss_idle_mib "$(rss_mib "$pid" VmRSS)"
    if import_doc "$sock" "$doc_one"; then
        one_expect=("${expect_cache[@]}" --expect "\"accessToken\":\"$token_one\"")
        load_runs one "$pid" "$sock" "$req_one" "${one_expect[@]}"
        step "brokerd, 1 account, varied requests"
        load_runs oneV "$pid" "$sock" "$varied_one" "${expect_cache[@]}"  # + each line's own access token
        # The echo server once more, replying with this answer instead of the request line (for information: the floor
        # of moving an answer of this size; brokerd's targets stay against the plain echo).
        answer_one=$work/answer-one.json
        if "$py" -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(open(sys.argv[2], "rb").read())
data = b""
while not data.endswith(b"\n"):
    chunk = s.recv(1 << 20)
    if not chunk: sys.exit(1)
    data += chunk
open(sys.argv[3], "wb").write(data)' "$sock" "$req_one" "$answer_one"; then
            record answer_bytes "$(stat -c %s "$answer_one")"
            "$out/echo_server" "$work/echo-answer.sock" "$answer_one" &
            daemons+=("$!")
            echo_answer_pid=$!
            "$py" "$bench/timing.py" answer "$work/echo-answer.sock" "$req_one" --since "$EPOCHREALTIME" >/dev/null
            load_runs echoanswer "$echo_answer_pid" "$work/echo-answer.sock" "$req_one" --expect '"result"'
            stop_daemon "$echo_answer_pid"
        else note "could not read an answer of brokerd for the echo server to reply with"; fi
        step "whole processes ($runs runs each)"
        if figures=$("$py" "$bench/timing.py" procs "$runs" -- "$brokerctl" --help); then
            record_all help "$figures"
        else note "brokerctl --help failed"; fi
        if figures=$("$py" "$bench/timing.py" procs "$runs" --stdout "$token_one" -- "$brokerctl" token \
            --client-id "$(meta "$doc_one" clientId)" --authority "$(meta "$doc_one" authority)" \
            --scope "$(meta "$doc_one" scope)" --socket "$sock"); then
            record_all token "$figures"
        else note "brokerctl token did not print the cached token"; fi
        one_pid=$pid one_sock=$sock  # kept for the big rounds (msal_rounds)
    else
        note "import of the 1-account document failed"
        stop_daemon "$pid"
    fi
else
    note "brokerd did not start (fresh state)"
fi
if figures=$("$py" "$bench/timing.py" procs "$py_runs" --stdout ok -- "$py" "$bench/msal_silent.py" "$doc_one" \
    "$doc_one.meta.json" --once); then
    record_all msalproc "$figures"
else note "the msal-python process did not get the cached token"; fi

# --- 3. msal-python in-process ----------------------------------------------------------------------------------
for size in 1 big; do
    doc=$doc_one; [[ $size == big ]] && doc=$doc_big
    step "msal-python in-process, $(basename "$doc")"
    if figures=$("$py" "$bench/msal_silent.py" "$doc" "$doc.meta.json" --count "$msal_calls" --warmup "$warm"); then
        record_all "msal$size" "$figures"
    else
        note "msal-python at $(basename "$doc"): not measured (errors or HTTP calls in the timed loop)"
    fi
done

# --- 2 (big), 6: import, restart, load, memory, removals --------------------------------------------------------
record doc_mib "$(awk -v b="$(stat -c %s "$doc_big")" 'BEGIN { printf "%.1f", b / 1048576 }')"
step "brokerd, $big_accounts accounts: import"
state_big=$work/state-big
imported=0
if start_daemon big "$state_big" "$version_request"; then
    t0=$EPOCHREALTIME
    if import_doc "$sock" "$doc_big"; then
        record import_s "$(since "$t0")"
        imported=1
    else
        note "import of $(basename "$doc_big") failed: the scale figures could not be measured"
    fi
    stop_daemon "$pid"
else
    note "brokerd did not start (fresh state for the import)"
fi
if ((imported)); then
    step "brokerd, $big_accounts accounts: restart, load runs, removals"
    # brokerd answers cache hits before its whole cache is loaded, and getStatus only after: the load time is spawn →
    # getStatus answered.
    if start_daemon big "$state_big" "$status_request" 300; then
        record load_ms "$start_ms"
        load_runs big "$pid" "$sock" "$req_big" "${expect_cache[@]}" --expect "\"accessToken\":\"$(meta "$doc_big" accessToken)\""
        record rss_big_mib "$(rss_mib "$pid" VmRSS)"
        record rss_big_peak_mib "$(rss_mib "$pid" VmHWM)"
        step "brokerd, $big_accounts accounts: varied requests"
        load_runs bigV "$pid" "$sock" "$varied_big" "${expect_cache[@]}"  # + each line's own access token
        record rss_bigV_mib "$(rss_mib "$pid" VmRSS)"
        client=$(meta "$doc_big" clientId)
        "$py" -c 'import json, sys
for i, hid in enumerate(json.load(open(sys.argv[1]))["removable"][: int(sys.argv[3])]):
    print(json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": "removeAccount",
                      "params": {"clientId": sys.argv[2], "account": {"homeAccountId": hid}}}, separators=(",", ":")))' \
            "$doc_big.meta.json" "$client" "$removes" >"$work/removals.jsonl"
        if figures=$("$py" "$bench/timing.py" each "$sock" "$work/removals.jsonl" --expect "\"removedAccessTokens\":$per_account"); then
            record_all remove "$figures"
        else note "removeAccount failed"; fi
        stop_daemon "$pid"
        # At exit brokerd checkpoints its write-ahead log: cache.db alone is the cache (and a -wal left over counts).
        record db_mib "$(stat -c %s "$state_big"/cache.db "$state_big"/cache.db-wal 2>/dev/null \
            | awk '{ total += $1 } END { printf "%.1f", total / 1048576 }')"
    else
        note "brokerd did not answer after a restart with the $big_accounts-account cache"
    fi
fi

[[ -n ${one_pid:-} ]] && stop_daemon "$one_pid"

# --- 8. D-Bus: brokerd's broker1 front end against an sd-bus echo of the same method shape -----------------------
source "$bench/dbus.sh"
dbus_bench "$doc_one" "$doc_big" || true  # what failed is in the notes; the table then shows MISSING

# --- 9. offline: the Entra emulator, a host that never answers, a network namespace ----------------------------
source "$bench/offline.sh"
offline_bench || true  # what failed is in the notes; the table then shows MISSING

# --- 5. cold start ----------------------------------------------------------------------------------------------
step "cold start ($cold_runs runs)"
state_cold=$state_big
if [[ $doc_cold != "$doc_big" ]]; then
    state_cold=$work/state-cold
    if start_daemon cold "$state_cold" "$version_request"; then
        import_doc "$sock" "$doc_cold" || { note "import of the 1,000-account document failed"; state_cold=; }
        stop_daemon "$pid"
    else state_cold=; fi
elif ((!imported)); then
    state_cold=
fi
if [[ -n $state_cold ]] && command -v systemd-socket-activate >/dev/null; then
    times=()
    for ((i = 0; i < cold_runs; i++)); do
        rm -f "$work/cold.sock"
        systemd-socket-activate -l "$work/cold.sock" "$brokerd" --state-dir "$state_cold" --config "$conf" \
            >>"$work/cold.log" 2>&1 &
        pid=$!  # systemd-socket-activate execs brokerd in place on the first connection: the same pid
        daemons+=("$pid")
        if answer=$("$py" "$bench/timing.py" answer "$work/cold.sock" "$req_cold" "${expect_cache[@]}"); then
            times+=("$(field "$answer" ms)")
        fi
        stop_daemon "$pid"
    done
    if ((${#times[@]} == cold_runs)); then
        record cold_median_ms "$(printf '%s\n' "${times[@]}" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
    else
        note "cold start: only ${#times[@]} of $cold_runs runs answered"; tail -n 5 "$work/cold.log" >&2
    fi
else
    note "cold start not measured (no 1,000-account state, or systemd-socket-activate missing: apt-get install systemd)"
fi

# --- 7. the audit -----------------------------------------------------------------------------------------------
# brokerd makes apps.db with its schema at start; make_audit.py fills it as brokerd would (the rows of a day of use)
# while it is stopped; then `brokerctl log --app APP` (the newest 100 rows of one app) is timed as a whole process.
step "audit: brokerctl log over $audit_rows rows ($runs runs)"
state_audit=$work/state-audit
record audit_rows "$audit_rows"
if start_daemon audit "$state_audit" "$version_request"; then
    stop_daemon "$pid"
    if "$py" "$bench/make_audit.py" "$state_audit/apps.db" "$audit_rows" >/dev/null && \
        start_daemon audit "$state_audit" "$version_request"; then
        # One line per row: the app has more than 100 rows, so a run that printed anything else is no figure.
        if figures=$("$py" "$bench/timing.py" procs "$runs" --stdout-lines 100 -- "$brokerctl" log --app \
            flatpak:org.example.App7 --socket "$sock"); then
            record_all auditlog "$figures"
        else note "brokerctl log --app failed"; fi
        stop_daemon "$pid"
    else note "the audit could not be filled, or brokerd did not start with it"; fi
else note "brokerd did not start (fresh state for the audit)"; fi

# --- the table --------------------------------------------------------------------------------------------------
step "done in $((SECONDS - started)) s"
echo
status=0
"$py" "$bench/table.py" "$results" "$out/bench-results.md" || status=$?
echo
echo "markdown: $out/bench-results.md"
exit "$status"
