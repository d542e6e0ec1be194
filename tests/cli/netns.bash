# Hosts made of network namespaces for the Bats tests that run trun across
# hosts (trun_hosts.bats, trun_sched.bats; trun_elastic.bats, which builds
# its own three hosts, shares the checks and the clean-up): two hosts, NS_A (10.77.0.1) and
# NS_B (10.77.0.2), joined by a veth pair (va$$ and vb$$), each trun with its
# own host name (a UTS namespace) and an /etc/hosts where nsa and node01 are
# 10.77.0.1, nsb and node02 10.77.0.2 (a mount namespace: Gloo and Slurm's
# node lists resolve names). Needs root and `ip netns`; netns_setup skips the
# test with the reason elsewhere. Load after helper.bash.

# Skips the test unless ip, unshare and root are here (trun_elastic.bats
# builds its three bridged hosts itself and shares this and netns_del).
netns_require() {
    command -v ip >/dev/null || skip "ip (iproute2) is not installed"
    command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
    [ "$(id -u)" = 0 ] || skip "network namespaces need root"
}

# netns_del NS...: kills what a test left running in each namespace (ours
# only: the namespaces are the test's) and deletes it; empty names pass.
netns_del() {
    local ns p
    for ns in "$@"; do
        [ -n "$ns" ] || continue
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
}

# Makes the two hosts (and $TMP); skips the test where it is not permitted.
netns_setup() {
    TMP=${TMP:-$(mktemp -d)}
    netns_require
    NS_A="tnA$$_$BATS_TEST_NUMBER"
    NS_B="tnB$$_$BATS_TEST_NUMBER"
    ip netns add "$NS_A" 2>"$TMP/err" || skip "ip netns add is not permitted: $(cat "$TMP/err")"
    ip netns add "$NS_B" || skip "ip netns add is not permitted"
    ip netns exec "$NS_A" unshare --uts true 2>"$TMP/err" ||
        skip "ip netns exec with unshare --uts is not permitted: $(cat "$TMP/err")"
    local va="va$$" vb="vb$$"
    ip link add "$va" type veth peer name "$vb" 2>"$TMP/err" ||
        skip "veth pairs are not permitted: $(cat "$TMP/err")"
    ip link set "$va" netns "$NS_A"
    ip link set "$vb" netns "$NS_B"
    ip -n "$NS_A" addr add 10.77.0.1/24 dev "$va"
    ip -n "$NS_B" addr add 10.77.0.2/24 dev "$vb"
    local ns
    for ns in "$NS_A" "$NS_B"; do
        ip -n "$ns" link set lo up
    done
    ip -n "$NS_A" link set "$va" up
    ip -n "$NS_B" link set "$vb" up
    printf '127.0.0.1 localhost\n10.77.0.1 nsa node01\n10.77.0.2 nsb node02\n' >"$TMP/hosts"
}

# Deletes the two hosts, with what a failed test left running there, and $TMP.
netns_teardown() {
    netns_del "${NS_A:-}" "${NS_B:-}"
    rm -rf "$TMP"
}

# on_host NS NAME COMMAND...: runs COMMAND on host NS, whose name is NAME.
on_host() {
    local ns=$1 name=$2
    shift 2
    ip netns exec "$ns" unshare --uts --mount sh -c \
        'mount --bind "$1" /etc/hosts && hostname "$0" && shift && exec "$@"' "$name" "$TMP/hosts" "$@"
}

# The job's trun on host NS (NAME); its output and "exit STATUS" go to $TMP/NAME.
node() {
    local ns=$1 name=$2
    shift 2
    local rc=0
    on_host "$ns" "$name" timeout 120 trun --no-python "$@" >"$TMP/$name" 2>&1 || rc=$?
    echo "exit $rc" >>"$TMP/$name"
}

# The job's trun on both hosts, nsb's first (it waits for the endpoint's
# owner to host the store); prints both outputs.
host_pair() {
    node "$NS_B" nsb "$@" &
    node "$NS_A" nsa "$@"
    wait
    cat "$TMP/nsa" "$TMP/nsb"
}
