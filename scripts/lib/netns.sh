# Sourced by the suites that build a network: one way to make network namespaces, and to
# remove exactly the ones this run made (never another run's, never by a name pattern).
# Everything lives inside the namespaces (bridges, veth ends, routes), so deleting them
# removes every link; nothing is created in the host's namespace.
#
#   ns_init TAG       names this run's namespaces pfx<TAG><pid>-ROLE; call once, first
#   ns_name ROLE      the namespace's name (for `ip -n`, `ip netns exec`, nsenter)
#   ns_new ROLE       a namespace with lo up, multicast on lo, IPv6 off
#   ns_bridge ROLE [ADDR/PREFIX]
#                     a namespace holding br0, the venue switch (no STP, no IGMP
#                     snooping: a show's multicast reaches every port at once)
#   ns_port SW ROLE ADDR/PREFIX
#                     a namespace ROLE whose eth0 is a port of SW's br0 (veth v-ROLE there),
#                     multicast routed over eth0
#   ns_pair A ADDR_A B ADDR_B
#                     two namespaces joined by one veth, eth0 in each
#   in_ns ROLE CMD... run CMD in ROLE's network namespace only (nsenter --net: the mount
#                     namespace and /sys stay the caller's, as a unit's mounts need)
#   ns_exec ROLE CMD...
#                     run CMD as `ip netns exec` does (its own /sys, for tools that read
#                     an interface there)
#   ns_cleanup        kill every process left in this run's namespaces, then delete them;
#                     safe to call twice (suites call it from their EXIT trap)

NS_PREFIX=""
NS_MADE=()

ns_init() { NS_PREFIX="pfx$1$$"; }

ns_name() { echo "$NS_PREFIX-$1"; }

ns_new() {
  local ns
  [ -n "$NS_PREFIX" ] || { echo "FAIL - ns_new before ns_init"; return 1; }
  ns=$(ns_name "$1")
  ip netns add "$ns" || { echo "FAIL - ip netns add $ns"; return 1; }
  NS_MADE+=("$ns")
  ip -n "$ns" link set lo up
  ip -n "$ns" link set lo multicast on
  # The suites speak IPv4 only; IPv6's router solicitations would be the only other traffic.
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 > /dev/null 2>&1 || true
}

ns_bridge() {
  local ns
  ns_new "$1" || return 1
  ns=$(ns_name "$1")
  ip -n "$ns" link add br0 type bridge stp_state 0 mcast_snooping 0 || return 1
  ip -n "$ns" link set br0 up
  [ -z "${2:-}" ] || ip -n "$ns" addr add "$2" dev br0
}

# The host side of a port is named v-ROLE inside SW: interface names are at most 15 bytes.
ns_port() {
  local sw ns
  sw=$(ns_name "$1")
  ns_new "$2" || return 1
  ns=$(ns_name "$2")
  ip -n "$sw" link add "v-$2" type veth peer name eth0 netns "$ns" || return 1
  ip -n "$sw" link set "v-$2" master br0 up
  ns_addr "$ns" eth0 "$3"
}

ns_pair() {
  local a b
  ns_new "$1" && ns_new "$3" || return 1
  a=$(ns_name "$1"); b=$(ns_name "$3")
  ip -n "$a" link add eth0 type veth peer name eth0 netns "$b" || return 1
  ns_addr "$a" eth0 "$2"
  ns_addr "$b" eth0 "$4"
}

ns_addr() { # namespace interface addr/prefix
  ip -n "$1" addr add "$3" dev "$2"
  ip -n "$1" link set "$2" up
  ip -n "$1" route add 224.0.0.0/4 dev "$2" 2> /dev/null || ip -n "$1" route replace 224.0.0.0/4 dev "$2"
}

in_ns() { local ns; ns=$(ns_name "$1"); shift; nsenter --net="/run/netns/$ns" -- "$@"; }

ns_exec() { local ns; ns=$(ns_name "$1"); shift; ip netns exec "$ns" "$@"; }

ns_cleanup() {
  local ns pid _
  for ns in "${NS_MADE[@]}"; do
    for pid in $(ip netns pids "$ns" 2> /dev/null); do kill "$pid" 2> /dev/null; done
  done
  # Give them up to 2 s to end on SIGTERM (a player writes its last profile), then SIGKILL.
  for _ in $(seq 40); do
    pid=""
    for ns in "${NS_MADE[@]}"; do pid+=$(ip netns pids "$ns" 2> /dev/null); done
    [ -z "$pid" ] && break
    sleep 0.05
  done
  for ns in "${NS_MADE[@]}"; do
    for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$pid" 2> /dev/null; done
    ip netns del "$ns" 2> /dev/null
  done
  NS_MADE=()
}
