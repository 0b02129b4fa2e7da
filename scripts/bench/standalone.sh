# Sourced by a section of scripts/bench.sh run on its own (`dbus.sh --standalone`, `offline.sh --standalone`): what
# bench.sh gives its sections otherwise. `standalone_setup NAME` needs $root, $bin_dir and $keep, and sets up the
# binaries ($brokerd, $brokerctl), Python ($py), a work directory ($work, removed at exit unless $keep), the results
# file and the helpers record, note, step, field, median, meta and stop_daemon, over the $daemons stopped at exit.
standalone_setup() {
    tool=$1
    bench=$root/scripts/bench
    brokerd=$bin_dir/brokerd brokerctl=$bin_dir/brokerctl
    [[ -x $brokerd && -x $brokerctl ]] || { echo "$tool: no brokerd/brokerctl in $bin_dir" >&2; exit 1; }
    py=$root/.build-bench/venv/bin/python
    [[ -x $py ]] || py=python3
    work=$(mktemp -d "/tmp/brokerd-${tool%.sh}-bench.XXXXXX")
    results=$work/results.env
    daemons=()
    trap standalone_cleanup EXIT
    unset BROKERD_SOCKET DBUS_SESSION_BUS_ADDRESS
    export XDG_CONFIG_HOME=$work/xdg-config XDG_STATE_HOME=$work/xdg-state XDG_RUNTIME_DIR=$work/xdg-run
    mkdir -p "$XDG_CONFIG_HOME" "$XDG_STATE_HOME" "$XDG_RUNTIME_DIR"
    started=$SECONDS
}
standalone_cleanup() {
    local pid
    for pid in ${daemons[@]+"${daemons[@]}"}; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in ${daemons[@]+"${daemons[@]}"}; do wait "$pid" 2>/dev/null || true; done
    if ((keep)); then echo "$tool: kept $work" >&2; else rm -rf "$work"; fi
}
record() { echo "$1=$2" >>"$results"; }
note() { echo "note=$*" >>"$results"; echo "$tool: $*" >&2; }
step() { printf '[%3d s] %s\n' $((SECONDS - started)) "$*" >&2; }
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
meta() { "$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1.meta.json" "$2"; }
stop_daemon() {  # PID: SIGTERM (brokerd flushes the cache), SIGKILL after 60 s
    local i left=() p
    if kill -TERM "$1" 2>/dev/null; then
        for ((i = 0; i < 600; i++)); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$1" 2>/dev/null || true
    fi
    wait "$1" 2>/dev/null || true
    for p in ${daemons[@]+"${daemons[@]}"}; do [[ $p == "$1" ]] || left+=("$p"); done
    daemons=(${left[@]+"${left[@]}"})
}
