# shellcheck shell=bash
# The D-Bus row of the whole-system benchmark (issue #27): brokerd's com.microsoft.identity.broker1 front end, the
# way msal-python's pymsalruntime calls it (acquireTokenSilently("0.0", correlation id, request JSON) → answer JSON on
# the session bus), against the smallest sd-bus service of the same method shape (dbus_echo: the same object path,
# interface, method and signature, replying with brokerd's real answer, so the same bytes cross the bus), both on
# one private dbus-daemon and driven by the same sd-bus client (dbus_load).
#
# Two modes, three alternating rounds each (an echo run, then a brokerd run; each side's median is the figure):
#   repeated: one request, again and again: the 1-account document's benchmark entry;
#   varied:   each call a random line of a request file: a random account of the document and one of its cached
#             scope sets, never the same line twice in a row, each answer checked for that line's access token.
# The bus, the service and the client are pinned to one CPU (the first this script may use) during the runs: a round
# trip through the bus is three processes; left alone, where the scheduler puts them moves the figure by more than
# the difference measured (bench.sh's "same core" rows are made the same way).
#
# Sourced by scripts/bench.sh, it defines
#   dbus_bench ONE_DOC VARIED_DOC
# which records (through bench.sh's `record`): dbusecho_p50_us dbusecho_p99_us dbus_p50_us dbus_p99_us dbus_rounds
# dbus_answer_bytes; dbusechoV_p50_us dbusechoV_p99_us dbusV_p50_us dbusV_p99_us dbusV_rounds dbusV_lines
# dbusV_accounts dbusV_pairs; dbus_pin. Calls per run: $dbus_count / $dbus_warm when set, else $seq / $warm. It uses bench.sh's $bench $out $work $brokerd $brokerctl $py $seq $warm $first_cpu
# (optional) and its record, note, step, median, field, meta, stop_daemon and the daemons array (whatever it starts
# is in `daemons` while it runs, so bench.sh's cleanup ends it). Returns 1 when a figure could not be measured.
#
# Standalone (for testing): makes a 1-account and a 1,000-account document in a temporary directory, builds the C
# programs there, and prints the recorded key=value lines.
#   bash scripts/bench/dbus.sh --standalone [--count N] [--warmup N] [--accounts N] [--bin-dir DIR] [--unpinned] [--keep]

dbus_name=com.microsoft.identity.broker1
dbus_echo_name=com.example.brokerd.bench.echo  # as long as brokerd's name: the same header size

# dbus_requests DOC MODE OUT: the broker1 request JSON as pymsalruntime sends it (§3.2 of linux-broker-dbus.md) for
# MODE "one" (the document's benchmark entry, from its meta file: one line) or "varied" (lines
# `REQUEST<TAB>EXPECTED`). The varied lines name the same (account, scope set) pairs, in the same order and with the
# same expected text, as make_cache.py's DOC.varied.jsonl (the socket's varied mode) when the document has one;
# otherwise 4,096 access tokens of the document drawn at random (seeded), with the same kind of expected text:
# "accessToken":" and the secret up to 64 characters past its JWT header (the header is the same in every token).
# Prints the number of accounts the lines name, then where the pairs come from.
dbus_requests() {
    "$py" - "$@" <<'EOF'
import json, os, random, sys
doc_path, mode, out = sys.argv[1:4]
doc = json.load(open(doc_path))
accounts = {a["home_account_id"]: a for a in doc["Account"].values()}
tokens = {(t["home_account_id"], t["client_id"], t["target"]): t for t in doc["AccessToken"].values()}
def request(at):
    a = accounts[at["home_account_id"]]
    account = {"alternativeAccountId": "", "clientInfo": a["client_info"], "environment": a["environment"],
               "familyName": "", "givenName": "", "homeAccountId": a["home_account_id"], "homeEnvironment": "",
               "localAccountId": a["local_account_id"], "middleName": "", "name": a.get("name", ""),
               "passwordChangeUrl": "", "passwordExpiry": 0, "realm": a["realm"], "username": a["username"]}
    auth = {"accessTokenToRenew": "", "account": account,
            "additionalQueryParametersForAuthorization": {"msal_client_sku": "MSAL.Python", "msal_client_ver": "1.39.0",
                                                          "x-client-xtra-sku": "MSAL.Python|1.39.0,|0.20.7,|,|,|12.0.2"},
            "authority": f"https://{at['environment']}/{at['realm']}", "authorizationType": 1,
            "clientId": at["client_id"], "decodedClaims": "", "enrollmentId": "", "isTestMode": False, "password": "",
            "popParams": None, "redirectUri": "https://login.microsoftonline.com/common/oauth2/nativeclient",
            "requestedScopes": at["target"].split(" "), "username": a["username"], "uxContextHandle": -1}
    return json.dumps({"authParameters": auth}, separators=(",", ":"))
def expected(at):
    secret = at["secret"]
    return '"accessToken":"' + secret[: secret.index(".") + 1 + 64]
if mode == "one":
    meta = json.load(open(doc_path + ".meta.json"))
    chosen = [tokens[(meta["homeAccountId"], meta["clientId"], meta["scope"])]]
    assert chosen[0]["secret"] == meta["accessToken"], "the meta file's entry is not the document's"
    lines, source = [request(chosen[0])], "the meta file's entry"
elif os.path.exists(doc_path + ".varied.jsonl"):
    chosen, lines = [], []
    for line in open(doc_path + ".varied.jsonl"):
        rpc, _, expect = line.rstrip("\n").partition("\t")
        p = json.loads(rpc)["params"]
        at = tokens[(p["account"]["homeAccountId"], p["clientId"], " ".join(p["scopes"]))]
        assert p["authority"].endswith("/" + at["realm"]), "a varied line's authority is not its account's tenant"
        chosen.append(at)
        lines.append(request(at) + "\t" + (expect or expected(at)))
    source = f"the pairs of {os.path.basename(doc_path)}.varied.jsonl (the socket's varied mode)"
else:
    chosen = random.Random("brokerd-bench-dbus").sample(list(tokens.values()), min(4096, len(tokens)))
    lines, source = [request(at) + "\t" + expected(at) for at in chosen], "random access tokens of the document"
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
print(len({at["home_account_id"] for at in chosen}))
print(source)
EOF
}

# dbus_rounds PREFIX REQUEST_FILE EXPECT...: three rounds of (echo run, brokerd run) with dbus_load; records the
# medians of each side's p50 and p99 (PREFIX_p50_us … and, with "dbus" → "dbusecho", the echo's) and PREFIX_rounds
# (each round's p50s, "brokerd / echo"). A PREFIX ending in V is the varied mode (REQUEST_FILE has many lines).
dbus_rounds() {
    local prefix=$1 request=$2 round figures echo_side=${prefix/dbus/dbusecho} ok=1
    local mode=() pin=() ours=() ours99=() theirs=() theirs99=() rounds=""
    shift 2
    [[ $prefix == *V ]] && mode=(--varied)
    [[ -n ${first_cpu:-} ]] && pin=(taskset -c "$first_cpu")
    for round in 1 2 3; do
        # The same seed on both sides of a round: the same calls in the same order.
        if figures=$(DBUS_SESSION_BUS_ADDRESS=$dbus_address ${pin[@]+"${pin[@]}"} "$out/dbus_load" "$dbus_echo_name" "$request" \
            ${mode[@]+"${mode[@]}"} --seed "$round" --count "$dbus_count" --warmup "$dbus_warm" --echo 2>"$work/dbus-load.err"); then
            theirs+=("$(field "$figures" p50_us)")
            theirs99+=("$(field "$figures" p99_us)")
        else
            note "$prefix: echo round $round not measured ($(tail -n 2 "$work/dbus-load.err" | tr '\n' ' '))"
            ok=0
        fi
        if figures=$(DBUS_SESSION_BUS_ADDRESS=$dbus_address ${pin[@]+"${pin[@]}"} "$out/dbus_load" "$dbus_name" "$request" \
            ${mode[@]+"${mode[@]}"} --seed "$round" --count "$dbus_count" --warmup "$dbus_warm" "$@" 2>"$work/dbus-load.err"); then
            ours+=("$(field "$figures" p50_us)")
            ours99+=("$(field "$figures" p99_us)")
            rounds+="${rounds:+, }${ours[-1]} / ${theirs[-1]:-?}"
        else
            note "$prefix: brokerd round $round not measured ($(tail -n 2 "$work/dbus-load.err" | tr '\n' ' '))"
            ok=0
        fi
    done
    ((${#ours[@]})) && record "${prefix}_p50_us" "$(median "${ours[@]}")" && record "${prefix}_p99_us" "$(median "${ours99[@]}")"
    ((${#theirs[@]})) && record "${echo_side}_p50_us" "$(median "${theirs[@]}")" &&
        record "${echo_side}_p99_us" "$(median "${theirs99[@]}")"
    record "${prefix}_rounds" "$rounds µs"
    ((ok))
}

# dbus_mode PREFIX DOC: a fresh brokerd with DOC imported, serving broker1 on the bench's bus, and an echo with its
# answer; then the rounds. Both are stopped at the end.
dbus_mode() {
    local prefix=$1 doc=$2 state=$work/dbus-state-$1 sock=$work/dbus-$1.sock log=$work/dbus-brokerd-$1.log
    local request=$work/dbus-request-$1 answer=$work/dbus-answer-$1.json daemon_pid echo_pid accounts expect=() ok=1
    local mode=()
    if [[ $prefix == *V ]]; then
        mode=(--varied)
        accounts=$(dbus_requests "$doc" varied "$request") || { note "$prefix: no request file"; return 1; }
        record dbusV_lines "$(wc -l <"$request")"
        record dbusV_accounts "$(head -n1 <<<"$accounts")"
        record dbusV_pairs "$(tail -n1 <<<"$accounts")"
    else
        dbus_requests "$doc" one "$request" >/dev/null || { note "$prefix: no request"; return 1; }
        expect=(--expect "\"accessToken\":\"$(meta "$doc" accessToken)\"")
    fi
    DBUS_SESSION_BUS_ADDRESS=$dbus_address "$brokerd" --socket "$sock" --state-dir "$state" --config "$dbus_conf" \
        >>"$log" 2>&1 &
    daemon_pid=$!
    daemons+=("$daemon_pid")
    if ! "$py" "$bench/timing.py" answer "$sock" "$dbus_version_request" --since "$EPOCHREALTIME" --timeout 30 >/dev/null ||
        ! "$brokerctl" import "$doc" --socket "$sock" >/dev/null; then
        note "$prefix: brokerd did not start or did not import $(basename "$doc")"; tail -n 20 "$log" >&2
        stop_daemon "$daemon_pid"
        return 1
    fi
    # brokerd's answer to the first request (waiting for it to own the name): what the echo replies.
    if ! DBUS_SESSION_BUS_ADDRESS=$dbus_address "$out/dbus_load" "$dbus_name" "$request" ${expect[@]+"${expect[@]}"} \
        ${mode[@]+"${mode[@]}"} --count 1 --warmup 0 --wait 30 --save "$answer" >/dev/null \
        2>"$work/dbus-load.err"; then
        note "$prefix: brokerd did not answer on D-Bus ($(tail -n 2 "$work/dbus-load.err" | tr '\n' ' '))"
        tail -n 20 "$log" >&2
        stop_daemon "$daemon_pid"
        return 1
    fi
    [[ $prefix == *V ]] || record dbus_answer_bytes "$(stat -c %s "$answer")"
    DBUS_SESSION_BUS_ADDRESS=$dbus_address "$out/dbus_echo" "$dbus_echo_name" "$answer" 2>>"$work/dbus-echo.log" &
    echo_pid=$!
    daemons+=("$echo_pid")
    if DBUS_SESSION_BUS_ADDRESS=$dbus_address "$out/dbus_load" "$dbus_echo_name" "$request" --echo --count 1 \
        --warmup 0 --wait 10 ${mode[@]+"${mode[@]}"} >/dev/null 2>"$work/dbus-load.err"; then
        if [[ -n ${first_cpu:-} ]]; then
            local p
            for p in "$dbus_bus_pid" "$daemon_pid" "$echo_pid"; do taskset -a -p -c "$first_cpu" "$p" >/dev/null; done
        fi
        dbus_rounds "$prefix" "$request" ${expect[@]+"${expect[@]}"} || ok=0
    else
        note "$prefix: the D-Bus echo did not answer ($(tail -n 2 "$work/dbus-load.err" | tr '\n' ' '))"
        ok=0
    fi
    stop_daemon "$echo_pid"
    stop_daemon "$daemon_pid"
    if [[ -n ${all_cpus:-} ]]; then taskset -a -p -c "$all_cpus" "$dbus_bus_pid" >/dev/null 2>&1 || true; fi
    ((ok))
}

dbus_bench() {  # ONE_DOC VARIED_DOC
    local one_doc=$1 varied_doc=$2 program ok=1 i
    dbus_count=${dbus_count:-${seq:-20000}} dbus_warm=${dbus_warm:-${warm:-2000}}
    for program in dbus_echo dbus_load; do
        if [[ ! -x $out/$program || $bench/$program.c -nt $out/$program ]] &&
            ! cc -O2 -Wall -o "$out/$program" "$bench/$program.c" -lsystemd; then
            note "D-Bus: $program did not build (apt-get install libsystemd-dev)"
            return 1
        fi
    done
    if ! command -v dbus-daemon >/dev/null; then
        note "D-Bus: not measured (no dbus-daemon: apt-get install dbus-daemon)"
        return 1
    fi
    # A bus of its own: nothing activatable, only this user; brokerd's key in a file as in the rest of the bench.
    local dir=$work/dbus
    mkdir -p "$dir"
    dbus_address=unix:path=$dir/bus
    cat >"$dir/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>$dbus_address</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
EOF
    dbus_conf=$dir/brokerd.toml
    printf 'background_refresh = false\nallow_root = true\nkey_store = "file"\ndbus_broker = true\n' >"$dbus_conf"
    dbus_version_request=$dir/version.json
    echo '{"jsonrpc":"2.0","id":1,"method":"getBrokerVersion"}' >"$dbus_version_request"
    dbus-daemon --config-file="$dir/bus.conf" --nofork --nopidfile >>"$dir/bus.log" 2>&1 &
    dbus_bus_pid=$!
    daemons+=("$dbus_bus_pid")
    for ((i = 0; i < 500; i++)); do [[ -S $dir/bus ]] && break; sleep 0.01; done
    if [[ ! -S $dir/bus ]]; then
        note "D-Bus: the private dbus-daemon did not start ($(tail -n 2 "$dir/bus.log" | tr '\n' ' '))"
        stop_daemon "$dbus_bus_pid"
        return 1
    fi
    record dbus_pin "$([[ -n ${first_cpu:-} ]] && echo "bus, service and client on CPU $first_cpu" || echo unpinned)"
    step "D-Bus: repeated request, $(basename "$one_doc") (3 rounds of echo, brokerd; $dbus_count calls each)"
    dbus_mode dbus "$one_doc" || ok=0
    step "D-Bus: varied requests, $(basename "$varied_doc") (3 rounds of echo, brokerd; $dbus_count calls each)"
    dbus_mode dbusV "$varied_doc" || ok=0
    stop_daemon "$dbus_bus_pid"
    ((ok))
}

# --- standalone -------------------------------------------------------------------------------------------------
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -euo pipefail
    export LC_ALL=C
    if [[ ${1:-} != --standalone ]]; then
        sed -n '2,30p' "$0"
        exit 2
    fi
    shift
    root=$(cd "$(dirname "$0")/../.." && pwd)
    bench=$root/scripts/bench
    bin_dir=$root/.build-release/release
    seq=5000 warm=500 accounts=1000 keep=0
    while (($#)); do
        case $1 in
            --count) seq=$2; shift ;;
            --warmup) warm=$2; shift ;;
            --accounts) accounts=$2; shift ;;
            --bin-dir) bin_dir=$(cd "$2" && pwd); shift ;;
            --unpinned) dbus_unpinned=1 ;;
            --keep) keep=1 ;;
            *) echo "dbus.sh: unknown argument $1" >&2; exit 2 ;;
        esac
        shift
    done
    source "$root/scripts/bench/standalone.sh"
    standalone_setup dbus.sh
    out=$work/out
    mkdir -p "$out"
    all_cpus=$(taskset -pc $$ 2>/dev/null | sed 's/.*: //') || all_cpus=
    first_cpu=$(taskset -pc $$ 2>/dev/null | sed 's/.*: //' | tr ',' '\n' | head -n1 | cut -d- -f1) || first_cpu=
    ((${dbus_unpinned:-0})) && first_cpu=
    step "making a 1-account and a $accounts-account document in $work"
    "$py" "$bench/make_cache.py" 1 10 "$work/cache-1x10.json"
    "$py" "$bench/make_cache.py" "$accounts" 10 "$work/cache-${accounts}x10.json"
    status=0
    dbus_bench "$work/cache-1x10.json" "$work/cache-${accounts}x10.json" || status=1
    step "done"
    cat "$results"
    exit "$status"
fi
