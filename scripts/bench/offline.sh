# shellcheck shell=bash
# The offline rows of the whole-system benchmark (issue #28), against the Entra emulator (Tests/entra) and a brokerd
# signed in to it as alice@contoso.example (client fam-a, Graph's User.Read) with the fake browser (Tests/idp):
#   1. a cached token with the network unreachable, for every authority form (tenant id, tenant name, /common,
#      /organizations): brokerd restarted with every Microsoft host going to a listener that never answers (what a
#      dead link looks like: a request waits for its time limit), against brokerd restarted from the same state with
#      the emulator reachable. The two daemons run side by side; each round is an online run and an offline run of
#      the same form (in turn which first), pinned to one CPU (the first this script may use) like bench.sh's "same
#      core" rows; each side's figure is the median of the rounds, their ratio the median of the rounds' own ratios
#      (offline_rounds says why). Two modes per form: the request repeated (answered from the
#      connection's remembered answer after the first, as an app's repeated request is) and every request a
#      different line of the same request (whitespace after its commas differs, so no remembered answer fits and
#      each one resolves the authority and looks the token up). The dead host counts the connections it was offered:
#      a cache hit must offer it none.
#   2. what needs the network fails fast: after one acquireTokenSilently with forceRefresh that waits for
#      request_timeout on the dead host, the next few such calls are timed one by one (the host is backing off).
#   3. a background refresh runs when the network comes back: brokerd and the emulator in a network namespace of
#      their own (`unshare -rn`), every token due (renew_ahead = 86400) but the scheduled checks an hour apart; the
#      namespace's loopback goes down until brokerd logs "background refresh failed", then up: the figure is the time
#      from `ip link set lo up` to the arrival of the emulator's next successful token request (its own clock, the
#      same as ours). Without a namespace (unshare -rn refused) the figure is left out, with a note.
#
# Sourced by scripts/bench.sh, it defines
#   offline_bench
# which records (through bench.sh's `record`), per form F in tid name common orgs: online_F_p50_us offline_F_p50_us
# offline_F_ratio offline_F_rounds (repeated request), onlineV_F_p50_us offlineV_F_p50_us offlineV_F_ratio
# offlineV_F_rounds (a different line each time); offline_dead_connections offline_round_count offline_pin;
# failfast_first_ms failfast_median_ms failfast_max_ms failfast_count failfast_dead_connections; refresh_return_ms.
# It uses bench.sh's $root $bench $work $brokerd $brokerctl $py $load $seq $warm $quick $version_request $first_cpu
# $second_cpu (optional) and its record, note, step, median, field, stop_daemon and the daemons array (whatever it
# starts is in `daemons` while it runs, so bench.sh's cleanup ends it). Returns 1 when a figure could not be measured.
#
# Standalone (for testing): builds the load client in a temporary directory and prints the recorded key=value lines.
#   bash scripts/bench/offline.sh --standalone [--full] [--bin-dir DIR] [--keep]

offline_client=aaaaaaaa-0000-0000-0000-00000000000a
offline_scope=https://graph.microsoft.com/User.Read
offline_user=alice@contoso.example
offline_forms="tid name common orgs"
offline_no_refresh="the refresh after the network's return is not measured"

offline_authority() {  # FORM
    local cloud=https://login.microsoftonline.com
    case $1 in
        tid) echo "$cloud/11111111-1111-1111-1111-111111111111" ;;
        name) echo "$cloud/contoso.example" ;;
        common) echo "$cloud/common" ;;
        orgs) echo "$cloud/organizations" ;;
    esac
}

# Never prints a token: what brokerd or the load client said goes into the notes with anything JWT-shaped blanked.
offline_redact() { sed -E 's/eyJ[A-Za-z0-9_-]*(\.[A-Za-z0-9_-]*)*/<token>/g' | tail -n 2 | tr '\n' ' '; }

# offline_config FILE MICROSOFT_BASE_URL [EXTRA_LINE]...
offline_config() {
    local file=$1 base=$2
    shift 2
    {
        printf 'microsoft_base_url = "%s"\nallow_loopback_http = true\nopen_browser = "always"\n' "$base"
        printf 'interactive_timeout = 60\nallow_root = true\n'
        printf '%s\n' "$@"
    } >"$file"
}

# offline_entra DIR [PREFIX...]: starts the emulator (in the network namespace PREFIX enters, if any); sets
# offline_entra_pid and offline_http.
offline_entra() {
    local dir=$1 i
    shift
    mkdir -p "$dir"
    "$@" python3 "$root/Tests/entra/entra.py" --state-dir "$dir" >>"$dir/entra.log" 2>&1 &
    offline_entra_pid=$!
    daemons+=("$offline_entra_pid")
    for ((i = 0; i < 600; i++)); do
        [[ -s $dir/ready.json ]] && break
        kill -0 "$offline_entra_pid" 2>/dev/null || break
        sleep 0.05
    done
    if ! offline_http=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["http"])' "$dir/ready.json" \
        2>/dev/null); then
        note "offline: the Entra emulator did not start ($(tail -n 2 "$dir/entra.log" | tr '\n' ' '))"
        stop_daemon "$offline_entra_pid"
        return 1
    fi
}

# offline_control HTTP PATH [PREFIX...]: a POST to one of the emulator's /test/ control endpoints.
offline_control() {
    local http=$1 path=$2
    shift 2
    "$@" "$py" -c 'import sys, urllib.request
urllib.request.urlopen(urllib.request.Request(sys.argv[1], method="POST"), timeout=30).read()' "$http$path"
}

# offline_brokerd NAME STATE CONFIG [PREFIX...]: starts brokerd with the fake browser and waits until it answers
# (asked from inside the namespace too: brokerd reads its callers' /proc, which another user namespace may not);
# sets offline_pid and offline_sock.
offline_brokerd() {
    local name=$1 state=$2 config=$3
    shift 3
    offline_sock=$work/offline-$name.sock
    BROWSER=$root/Tests/idp/fake_browser.py IDP_BROWSER_LOG=$work/offline-browser.log \
        "$@" "$brokerd" --socket "$offline_sock" --state-dir "$state" --config "$config" >>"$work/offline-$name.log" 2>&1 &
    offline_pid=$!
    daemons+=("$offline_pid")
    if ! "$@" "$py" "$bench/timing.py" answer "$offline_sock" "$version_request" --since "$EPOCHREALTIME" \
        --timeout 30 >/dev/null; then
        note "offline: brokerd ($name) did not start ($(offline_redact <"$work/offline-$name.log"))"
        stop_daemon "$offline_pid"
        return 1
    fi
}

# offline_sign_in HTTP SOCKET [PREFIX...]: brokerctl login as alice (the emulator signs the next browser in as her);
# prints her homeAccountId, and nothing of the answer's tokens.
offline_sign_in() {
    local http=$1 sock=$2
    shift 2
    offline_control "$http" "/test/next-signin?username=$offline_user" "$@" || return 1
    "$@" "$brokerctl" login --client-id "$offline_client" --authority "$(offline_authority common)" \
        --scope "$offline_scope" --socket "$sock" --json 2>"$work/offline-login.err" |
        "$py" -c 'import json, sys; print(json.load(sys.stdin)["account"]["homeAccountId"])'
}

# offline_requests HID: per form, the request file (repeated mode) and a .jsonl of 4,096 lines of the same request
# that differ only in the spaces after its commas (0-3 after each of six: no two lines alike, so no remembered
# answer fits them; the memo starts again after 64); and the forceRefresh request (tenant id) for the fail-fast run.
offline_requests() {
    local form
    for form in $offline_forms; do
        "$py" - "$offline_client" "$(offline_authority "$form")" "$offline_scope" "$1" "$work/offline-$form" <<'EOF'
import json, sys
client, authority, scope, hid, out = sys.argv[1:6]
params = {"clientId": client, "authority": authority, "scopes": [scope], "account": {"homeAccountId": hid}}
request = {"jsonrpc": "2.0", "id": 1, "method": "acquireTokenSilently", "params": params}
line = json.dumps(request, separators=(",", ":"))
open(out + ".json", "w").write(line + "\n")
pieces = line.split(",")
assert len(pieces) == 7, "six commas expected outside the strings"
with open(out + ".jsonl", "w") as f:
    for variant in range(4 ** 6):
        spaces = [" " * ((variant >> (2 * i)) & 3) for i in range(6)]
        f.write(pieces[0] + "".join("," + s + p for s, p in zip(spaces, pieces[1:])) + "\n")
params["forceRefresh"] = True
open(out + "-refresh.json", "w").write(json.dumps(request, separators=(",", ":")) + "\n")
EOF
    done
}

# offline_learned SOCKET: waits (30 s at most) until brokerd has learned a tenant, a discovery document and the
# cloud's aliases (getStatus.network.learned), what a restart with no network then answers from.
offline_learned() {
    local i
    for ((i = 0; i < 300; i++)); do
        "$brokerctl" status --json --socket "$1" 2>/dev/null | "$py" -c 'import json, sys
learned = {f["kind"] for f in (json.load(sys.stdin).get("network") or {}).get("learned", [])}
sys.exit(0 if {"tenant", "discovery", "aliases"} <= learned else 1)' && return 0
        sleep 0.1
    done
    return 1
}

# offline_dead_host DIR: a listener on 127.0.0.1 that takes connections and never answers; writes its port to
# DIR/port and the number of connections it took so far to DIR/count. Sets offline_dead_pid.
offline_dead_host() {
    mkdir -p "$1"
    "$py" -c 'import os, socket, sys
port_file, count_file = sys.argv[1] + "/port", sys.argv[1] + "/count"
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(128)
open(count_file, "w").write("0")
open(port_file + ".new", "w").write(str(listener.getsockname()[1]))
os.rename(port_file + ".new", port_file)
held = []
while True:
    held.append(listener.accept()[0])  # kept open, never read: a request waits for its time limit
    open(count_file, "w").write(str(len(held)))' "$1" 2>>"$1/log" &
    offline_dead_pid=$!
    daemons+=("$offline_dead_pid")
    local i
    for ((i = 0; i < 200; i++)); do [[ -s $1/port ]] && return 0; sleep 0.05; done
    note "offline: the dead host did not start"
    return 1
}

# offline_run SOCKET FORM MODE EXPECT...: one run of the load client (pinned with $offline_pin_client); prints its p50.
offline_run() {
    local sock=$1 form=$2 request=("$work/offline-$2.json") figures
    [[ $3 == V ]] && request=(--requests "$work/offline-$form.jsonl")
    shift 3
    figures=$(${offline_pin_client[@]+"${offline_pin_client[@]}"} "$load" "$sock" "${request[@]}" --count "$seq" \
        --warmup "$warm" "$@" 2>"$work/offline-load.err") && field "$figures" p50_us
}

# offline_rounds ONLINE_SOCKET OFFLINE_SOCKET ROUNDS EXPECT...: for each form and mode, ROUNDS rounds of an online
# and an offline run (online first in odd rounds, offline first in even ones: neither side always runs second).
# Records each side's median p50, the median of the rounds' own ratios (offline / online: the two runs of a round are
# a fraction of a second apart, so what the machine does meanwhile moves both, while from one round to the next the
# p50 of either can move by a third under a concurrent build) and the rounds ("offline / online", µs).
offline_rounds() {
    local on_sock=$1 off_sock=$2 rounds=$3 form mode round on off ok=1
    shift 3
    declare -A ons=() offs=() ratios=() texts=()
    for ((round = 1; round <= rounds; round++)); do
        for form in $offline_forms; do
            for mode in "" V; do
                if ((round % 2)); then
                    on=$(offline_run "$on_sock" "$form" "$mode" "$@") && off=$(offline_run "$off_sock" "$form" "$mode" "$@")
                else
                    off=$(offline_run "$off_sock" "$form" "$mode" "$@") && on=$(offline_run "$on_sock" "$form" "$mode" "$@")
                fi || {
                    note "offline: $form${mode:+ (different lines)}, round $round not measured" \
                        "($(offline_redact <"$work/offline-load.err"))"
                    ok=0
                    continue
                }
                ons[$mode.$form]+=" $on" offs[$mode.$form]+=" $off"
                ratios[$mode.$form]+=" $(awk -v a="$off" -v b="$on" 'BEGIN { printf "%.3f", a / b }')"
                texts[$mode.$form]+="${texts[$mode.$form]:+, }$off / $on"
            done
        done
    done
    for form in $offline_forms; do
        for mode in "" V; do
            [[ -n ${ratios[$mode.$form]:-} ]] || continue
            # shellcheck disable=SC2086  # one figure per word
            record "online${mode}_${form}_p50_us" "$(median ${ons[$mode.$form]})"
            # shellcheck disable=SC2086
            record "offline${mode}_${form}_p50_us" "$(median ${offs[$mode.$form]})"
            # shellcheck disable=SC2086
            record "offline${mode}_${form}_ratio" "$(median ${ratios[$mode.$form]})"
            record "offline${mode}_${form}_rounds" "${texts[$mode.$form]} µs"
        done
    done
    ((ok))
}

# offline_fail_fast SOCKET DEAD_DIR: the first forceRefresh call waits for request_timeout on the dead host; the next
# ones are timed one by one while it backs off (2 s after one failure: the calls take milliseconds).
offline_fail_fast() {
    local sock=$1 dead=$2 figures before count=$((quick ? 5 : 10)) i
    local expect=(--expect '"code":-50006' --expect '"network":true' --expect '"retryAfter":')
    if ! figures=$("$py" "$bench/timing.py" each "$sock" "$work/offline-tid-refresh.json" "${expect[@]}" \
        2>"$work/offline-failfast.err"); then
        note "offline: the first forceRefresh call did not fail as a network error" \
            "($(offline_redact <"$work/offline-failfast.err"))"
        return 1
    fi
    record failfast_first_ms "$(field "$figures" median_ms)"
    before=$(<"$dead/count")
    for ((i = 0; i < count; i++)); do cat "$work/offline-tid-refresh.json"; done >"$work/offline-refresh-next.jsonl"
    if ! figures=$("$py" "$bench/timing.py" each "$sock" "$work/offline-refresh-next.jsonl" "${expect[@]}" \
        2>"$work/offline-failfast.err"); then
        note "offline: a forceRefresh call after the first did not fail as a network error" \
            "($(offline_redact <"$work/offline-failfast.err"))"
        return 1
    fi
    record failfast_count "$count"
    record failfast_median_ms "$(field "$figures" median_ms)"
    record failfast_max_ms "$(field "$figures" max_ms)"
    record failfast_dead_connections "$(($(<"$dead/count") - before))"
}

# The access token of one cached answer (for the load client's --expect: every answer, online and offline, must
# carry this same token). Printed to the caller's variable only.
offline_token() {  # SOCKET REQUEST_FILE
    "$py" -c 'import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(open(sys.argv[2], "rb").read())
data = b""
while not data.endswith(b"\n"):
    chunk = s.recv(1 << 16)
    if not chunk: sys.exit(1)
    data += chunk
result = json.loads(data).get("result") or {}
sys.exit(1) if result.get("source") != "cache" else print(result["accessToken"])' "$1" "$2"
}

# Items 1 and 2: sign in online, teach brokerd every form, then two daemons restarted from that state: one with the
# emulator, one with the dead host.
offline_tokens() {
    local dir=$work/offline rounds=$((quick ? 5 : 7)) hid token form ok=1 on_pid= off_pid= on_sock off_sock
    mkdir -p "$dir"
    offline_entra "$dir/entra" || return 1
    offline_config "$dir/online.toml" "$offline_http" "background_refresh = false" "request_timeout = 5"
    if ! offline_brokerd online "$dir/state-online" "$dir/online.toml"; then stop_daemon "$offline_entra_pid"; return 1; fi
    if ! hid=$(offline_sign_in "$offline_http" "$offline_sock"); then
        note "offline: the sign-in failed ($(offline_redact <"$work/offline-login.err"))"
        stop_daemon "$offline_pid"; stop_daemon "$offline_entra_pid"
        return 1
    fi
    offline_requests "$hid"
    for form in $offline_forms; do  # one online call per form: brokerd learns the tenant name's id, and the aliases
        "$py" "$bench/timing.py" answer "$offline_sock" "$work/offline-$form.json" --expect '"source":"cache"' \
            >/dev/null 2>&1 || { note "offline: no cached answer online for the $form form"; ok=0; }
    done
    offline_learned "$offline_sock" || { note "offline: brokerd learned no tenant, discovery or aliases"; ok=0; }
    stop_daemon "$offline_pid"
    ((ok)) || { stop_daemon "$offline_entra_pid"; return 1; }
    cp -a "$dir/state-online" "$dir/state-offline"
    offline_dead_host "$dir/dead" || { stop_daemon "$offline_entra_pid"; return 1; }
    offline_config "$dir/offline.toml" "http://127.0.0.1:$(<"$dir/dead/port")" "background_refresh = false" \
        "request_timeout = 2" "connect_timeout = 2"
    offline_brokerd online "$dir/state-online" "$dir/online.toml" && on_pid=$offline_pid on_sock=$offline_sock
    offline_brokerd offline "$dir/state-offline" "$dir/offline.toml" && off_pid=$offline_pid off_sock=$offline_sock
    if [[ -n ${on_pid:-} && -n ${off_pid:-} ]] && token=$(offline_token "$off_sock" "$work/offline-tid.json"); then
        offline_pin_client=()
        if [[ -n ${second_cpu:-} ]]; then
            taskset -a -p -c "$first_cpu" "$on_pid" >/dev/null
            taskset -a -p -c "$first_cpu" "$off_pid" >/dev/null
            offline_pin_client=(taskset -c "$first_cpu")
            record offline_pin "both daemons and the client on CPU $first_cpu"
        else
            record offline_pin unpinned
        fi
        record offline_round_count "$rounds"
        step "offline: $rounds rounds of (online, offline) per authority form and mode ($seq calls each)"
        offline_rounds "$on_sock" "$off_sock" "$rounds" --expect '"result"' --expect '"source":"cache"' \
            --expect "\"accessToken\":\"$token\"" || ok=0
        record offline_dead_connections "$(<"$dir/dead/count")"  # since the offline daemon started
        step "offline: fail-fast calls (the first waits for request_timeout, 2 s)"
        offline_fail_fast "$off_sock" "$dir/dead" || ok=0
    else
        note "offline: the two restarted daemons did not both start, or the offline one had no cached answer"
        ok=0
    fi
    [[ -n ${on_pid:-} ]] && stop_daemon "$on_pid"
    [[ -n ${off_pid:-} ]] && stop_daemon "$off_pid"
    stop_daemon "$offline_dead_pid"
    stop_daemon "$offline_entra_pid"
    ((ok))
}

# offline_namespace: a network namespace of our own with only a loopback link (up), held by a `sleep`; sets
# offline_holder and offline_enter (the command prefix that runs a command inside it).
offline_namespace() {
    local i ours
    command -v unshare >/dev/null && command -v nsenter >/dev/null && command -v ip >/dev/null || {
        note "offline: no unshare/nsenter/ip (apt-get install util-linux iproute2): $offline_no_refresh"
        return 1
    }
    ours=$(readlink /proc/self/ns/net)
    unshare -rn sleep 3600 2>>"$work/offline-holder.log" &
    offline_holder=$!
    daemons+=("$offline_holder")
    for ((i = 0; i < 500; i++)); do
        [[ -e /proc/$offline_holder/ns/net && $(readlink "/proc/$offline_holder/ns/net" 2>/dev/null) != "$ours" ]] && break
        kill -0 "$offline_holder" 2>/dev/null || break
        sleep 0.01
    done
    offline_enter=(nsenter -t "$offline_holder" -U -n --preserve-credentials)
    if ! kill -0 "$offline_holder" 2>/dev/null || [[ $(readlink "/proc/$offline_holder/ns/net" 2>/dev/null) == "$ours" ]] ||
        ! "${offline_enter[@]}" ip link set lo up 2>>"$work/offline-holder.log"; then
        note "offline: unshare -rn could not make a network namespace here" \
            "($(tail -n 1 "$work/offline-holder.log" 2>/dev/null)): $offline_no_refresh"
        stop_daemon "$offline_holder"
        return 1
    fi
}

# offline_refresh_arrival HTTP SINCE AFTER_SEQ [PREFIX...]: waits (30 s at most) for the emulator's first successful
# token request after AFTER_SEQ, and prints the time from SINCE (epoch seconds) to its arrival, in ms.
offline_refresh_arrival() {
    local http=$1 since=$2 after=$3
    shift 3
    "$@" "$py" -c 'import json, sys, time, urllib.request
http, since, after = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(http + "/test/requests?endpoint=token&limit=200", timeout=5) as answer:
            recent = json.load(answer)["recent"]
        done = [r for r in recent if r["endpoint"] == "token" and r["seq"] > after and r["status"] == 200]
        if done:
            print(round((min(r["time"] for r in done) - since) * 1000))
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.05)
sys.exit(1)' "$http" "$since" "$after"
}

# offline_link_cycle HTTP: the loopback down until brokerd's background refresh fails, then up; records the time to
# the emulator's next successful token request.
offline_link_cycle() {
    local http=$1 log=$work/offline-netns.log after since ms i
    after=$("${offline_enter[@]}" "$py" -c 'import json, sys, urllib.request
recent = json.load(urllib.request.urlopen(sys.argv[1] + "/test/requests?limit=2000", timeout=30))["recent"]
print(max([r["seq"] for r in recent] + [0]))' \
        "$http") || { note "offline: the emulator's request log could not be read"; return 1; }
    "${offline_enter[@]}" ip link set lo down
    for ((i = 0; i < 600; i++)); do
        grep -q "background refresh failed" "$log" && break
        sleep 0.05
    done
    if ! grep -q "background refresh failed" "$log"; then
        note "offline: brokerd did not log \"background refresh failed\" within 30 s of the loopback going down"
        "${offline_enter[@]}" ip link set lo up
        return 1
    fi
    since=$EPOCHREALTIME
    "${offline_enter[@]}" ip link set lo up
    if ! ms=$(offline_refresh_arrival "$http" "$since" "$after" "${offline_enter[@]}"); then
        note "offline: no successful token request within 30 s of the loopback's return ($(offline_redact <"$log"))"
        return 1
    fi
    record refresh_return_ms "$ms"
}

# Item 3: brokerd and the emulator in the namespace, every token due, the scheduled checks an hour apart.
offline_refresh() {
    local dir=$work/offline-netns ok=0
    offline_namespace || return 1
    mkdir -p "$dir"
    if offline_entra "$dir/entra" "${offline_enter[@]}"; then
        offline_config "$dir/brokerd.toml" "$offline_http" "refresh_check_interval = 3600" "renew_ahead = 86400" \
            "request_timeout = 5"
        if offline_brokerd netns "$dir/state" "$dir/brokerd.toml" "${offline_enter[@]}"; then
            if offline_sign_in "$offline_http" "$offline_sock" "${offline_enter[@]}" >/dev/null; then
                offline_link_cycle "$offline_http" && ok=1
            else
                note "offline: the sign-in in the namespace failed ($(offline_redact <"$work/offline-login.err"))"
            fi
            stop_daemon "$offline_pid"
        fi
        stop_daemon "$offline_entra_pid"
    fi
    stop_daemon "$offline_holder"
    ((ok))
}

offline_bench() {
    local ok=1
    step "offline: sign-in against the Entra emulator, two daemons restarted from its state (online, dead host)"
    offline_tokens || ok=0
    step "offline: the background refresh after the network's return (a network namespace)"
    offline_refresh || ok=0
    ((ok))
}

# --- standalone -------------------------------------------------------------------------------------------------
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -euo pipefail
    export LC_ALL=C
    if [[ ${1:-} != --standalone ]]; then
        sed -n '2,34p' "$0"
        exit 2
    fi
    shift
    root=$(cd "$(dirname "$0")/../.." && pwd)
    bench=$root/scripts/bench
    bin_dir=$root/.build-release/release
    quick=1 keep=0
    while (($#)); do
        case $1 in
            --full) quick=0 ;;
            --bin-dir) bin_dir=$(cd "$2" && pwd); shift ;;
            --keep) keep=1 ;;
            *) echo "offline.sh: unknown argument $1" >&2; exit 2 ;;
        esac
        shift
    done
    if ((quick)); then seq=2000 warm=200; else seq=20000 warm=2000; fi
    source "$root/scripts/bench/standalone.sh"
    standalone_setup offline.sh
    read -r first_cpu second_cpu <<<"$(taskset -pc $$ 2>/dev/null | sed 's/.*: //' | tr ',' '\n' |
        awk -F- '{ hi = ($2 == "") ? $1 : $2; for (c = $1; c <= hi; c++) print c }' | head -n 2 | tr '\n' ' ')" || true
    load=$work/load_client
    cc -O2 -pthread -Wall -o "$load" "$bench/load_client.c"
    version_request=$work/version.json
    echo '{"jsonrpc":"2.0","id":1,"method":"getBrokerVersion"}' >"$version_request"
    status=0
    offline_bench || status=1
    step "done"
    cat "$results"
    exit "$status"
fi
