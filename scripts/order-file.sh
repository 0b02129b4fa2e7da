#!/usr/bin/env bash
# Regenerates packaging/release.order: the functions brokerd and brokerctl run while starting, idling, importing
# a cache and answering cache hits, in the order ld.lld lays them out (see the Makefile for why).
#
#   bash scripts/order-file.sh [--bin-dir DIR]   # default: .build-release's binaries (built by `make` if missing)
#
# Each program runs under valgrind's callgrind, which sees every function executed (sampling would miss the
# small ones). The list only moves code; a function missing from it still links and runs, it just sits with
# the cold code. Run it after large changes to start-up or the silent path, rebuild (`make`) and compare
# `brokerd RSS idle` in scripts/bench.sh.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
root=$PWD
bin_dir=
while (($#)); do
    case $1 in
        --bin-dir) bin_dir=$(cd "${2:?--bin-dir needs a directory}" && pwd); shift ;;
        *) echo "usage: $0 [--bin-dir DIR]" >&2; exit 2 ;;
    esac
    shift
done
command -v valgrind >/dev/null || { echo "order-file.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
if [[ -z $bin_dir ]]; then
    [[ -x .build-release/x86_64-unknown-linux-gnu/release/brokerd ]] || make build >&2
    bin_dir=$(make -s print-bin-dir)
fi

work=$(mktemp -d)
trap 'kill "${daemon:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
# Valgrind 3.19 (Debian 12) cannot read the toolchain's DWARF 5; the symbol table is all callgrind needs.
for program in brokerd brokerctl; do
    objcopy --strip-debug "$bin_dir/$program" "$work/$program"
done
export XDG_CONFIG_HOME=$work/config XDG_STATE_HOME=$work/state XDG_RUNTIME_DIR=$work/run
unset DBUS_SESSION_BUS_ADDRESS  # no session bus: the key store is a key file in $work, never the user's keyring
mkdir -p "$XDG_CONFIG_HOME" "$XDG_STATE_HOME" "$XDG_RUNTIME_DIR"
export BROKERD_SOCKET=$work/brokerd.sock
python3 scripts/bench/make_cache.py 1 10 "$work/cache.json" >/dev/null
meta() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$work/cache.json.meta.json" "$1"; }
callgrind() {  # OUT PROGRAM ARGS... (exec: in the background, $! is then valgrind itself)
    local out=$1; shift
    exec valgrind --tool=callgrind --demangle=no --dump-instr=no --callgrind-out-file="$work/$out" "$@"
}

(callgrind daemon.out "$work/brokerd" --socket "$BROKERD_SOCKET") 2>"$work/daemon.log" &
daemon=$!
for _ in $(seq 240); do [[ -S $BROKERD_SOCKET ]] && break; sleep 0.25; done
[[ -S $BROKERD_SOCKET ]] || { cat "$work/daemon.log" >&2; echo "order-file.sh: brokerd did not start" >&2; exit 1; }
sleep 2  # idle: whatever runs after start (timers, the lazy load) belongs in the list too
token=(token --client-id "$(meta clientId)" --authority "$(meta authority)" --scope "$(meta scope)")
"$bin_dir/brokerctl" status >/dev/null
"$bin_dir/brokerctl" import "$work/cache.json" >/dev/null
(callgrind ctl-token.out "$work/brokerctl" "${token[@]}") >/dev/null 2>>"$work/ctl.log"
(callgrind ctl-status.out "$work/brokerctl" status) >/dev/null 2>>"$work/ctl.log"
(callgrind ctl-help.out "$work/brokerctl" --help) >/dev/null 2>>"$work/ctl.log"
# The request line the load clients send, several times on one connection: the remembered-answer path.
python3 - "$BROKERD_SOCKET" "$(meta clientId)" "$(meta authority)" "$(meta scope)" "$(meta homeAccountId)" <<'EOF'
import json, socket, sys
path, client, authority, scope, home = sys.argv[1:]
line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "acquireTokenSilently",
                   "params": {"clientId": client, "authority": authority, "scopes": [scope],
                              "account": {"homeAccountId": home}}}, separators=(",", ":")).encode() + b"\n"
with socket.socket(socket.AF_UNIX) as s:
    s.connect(path)
    reader = s.makefile("rb")
    for _ in range(20):
        s.sendall(line)
        answer = json.loads(reader.readline())
        assert "result" in answer, answer
EOF
for _ in 1 2 3; do "$bin_dir/brokerctl" "${token[@]}" >/dev/null; done
"$bin_dir/brokerctl" status >/dev/null
kill -TERM "$daemon"; wait "$daemon" || true; daemon=

# callgrind_annotate lists every function with its object file; keep those of our two programs.
for out in "$work"/*.out; do
    callgrind_annotate --threshold=100 --inclusive=no "$out" 2>/dev/null
done | sed -nE "s#^ *[0-9,]+ \([ 0-9.]+%\) +[^ ]*:(.+) \[$work/(brokerd|brokerctl)\]\$#\1#p" |
    sed -E "s/'[0-9]+\$//" | sort -u >"$work/seen"
# A local name defined in many objects (value witnesses such as $sSqwxx, merged "Tm" thunks, objectdestroy) would
# pull every copy into the hot region, executed or not: those names are left out.
nm "$bin_dir/brokerd" | awk '{ print $NF }' | sort | uniq -c | awk '$1 > 4 { print $2 }' >"$work/common"
grep -vxF -f "$work/common" "$work/seen" >"$work/order"
count=$(wc -l <"$work/order")
((count > 1000)) || { echo "order-file.sh: only $count functions seen; not replacing the list" >&2; exit 1; }
mv "$work/order" packaging/release.order
echo "packaging/release.order: $count functions"
# SwiftPM does not see the list as an input of the link: drop the binaries so that the next `make` links again.
rm -f "$bin_dir/brokerd" "$bin_dir/brokerctl"
echo "removed $bin_dir/brokerd and brokerctl: run make to link them with the new list"
