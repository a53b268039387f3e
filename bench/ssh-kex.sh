#!/usr/bin/env bash
# The operator's CPU per SSH connection for each key exchange, side by side in one run:
# this host's own ssh and sshd on loopback, ROUNDS alternating rounds of N connections per
# key exchange (`ssh ... true`, pinned host key, BatchMode, -F /dev/null, as pfx-fleet
# connects), client user + system CPU per connection from GNU time. One attempt; a key
# exchange this OpenSSH lacks is printed UNMEASURABLE.
#
#   sudo bench/ssh-kex.sh [N] [ROUNDS]        (default 20 connections, 3 rounds)
set -euo pipefail
n=${1:-20}
rounds=${2:-3}
. "$(dirname "$0")/../scripts/lib/check.sh"
need_root sshd
need_cmds fleet.apt ssh sshd ssh-keygen /usr/bin/time
work=$(mktemp -d /tmp/pfx-ssh-kex.XXXXXX)
sshd_pid=""
cleanup() { [ -n "$sshd_pid" ] && kill "$sshd_pid" 2> /dev/null; rm -rf "$work"; }
trap cleanup EXIT INT TERM
ssh-keygen -q -t ed25519 -N "" -f "$work/host"
ssh-keygen -q -t ed25519 -N "" -f "$work/id"
cp "$work/id.pub" "$work/authorized_keys"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf '127.0.0.1 %s\n' "$(cut -d' ' -f1,2 "$work/host.pub")" | sed "s/^127.0.0.1/[127.0.0.1]:$port/" > "$work/known_hosts"
cat > "$work/sshd_config" << CONF
Port $port
ListenAddress 127.0.0.1
HostKey $work/host
AuthorizedKeysFile $work/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile $work/sshd.pid
MaxStartups 100
CONF
mkdir -p /run/sshd
"$(command -v sshd)" -D -f "$work/sshd_config" -E "$work/sshd.log" &
sshd_pid=$!
wait_for 5 "sshd listening on 127.0.0.1:$port" python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2).close()" || exit 1
echo "ssh: $(ssh -V 2>&1); $n connections per cell, $rounds rounds; load $(cut -d' ' -f1-3 /proc/loadavg)"
supported=$(ssh -Q kex)
for round in $(seq "$rounds"); do
  for k in sntrup761x25519-sha512@openssh.com mlkem768x25519-sha256 curve25519-sha256; do
    if ! grep -qx "$k" <<< "$supported"; then echo "round $round $k: UNMEASURABLE: this ssh lacks it"; continue; fi
    /usr/bin/time -f "%U %S" -o "$work/t" bash -c "for i in \$(seq $n); do ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=$work/known_hosts -i $work/id -o KexAlgorithms=$k -p $port root@127.0.0.1 true || exit 1; done" \
      || { echo "round $round $k: UNMEASURABLE: a connection failed (see $work/sshd.log)"; continue; }
    awk -v r="$round" -v k="$k" -v n="$n" '{printf "round %s %s: client CPU %.1f ms per connection\n", r, k, ($1+$2)*1000/n}' "$work/t"
  done
done
