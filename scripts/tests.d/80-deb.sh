#!/usr/bin/env bash
# The .deb for units already running (scripts/build-deb, docs/install-deb.md): build the
# amd64 packages, then in a fresh Debian 12 root (mmdebstrap, native amd64, variant apt,
# with systemd and openssh-client, pfx-fleet's dependency) install pfx-player with apt,
# check its files, conffile and enable links, edit the show, upgrade to a newer build and check the edit survived, run
# `systemd-analyze verify --root` on what it installed, lintian each .deb (no errors),
# install pfx-agent and pfx-fleet, check the show store (the group pfx, /var/lib/pfx root:pfx
# 2775, the agent writes a show there as that group and nobody else can), and purge: a store
# holding shows is left in place (and said so), an empty one goes, and nothing else the
# packages made is left.
#
# Env: PFX_CACHE (the .deb cache, as for image builds), PFX_DEB_KEEP=1 (keep the root),
#      PFX_DEB_BIN_DIR (prebuilt amd64 binaries; default: cargo build --release;
#      scripts/test-all sets it to its debug build, which packs the same way).
# Each step's checks die (check.sh) when one does not hold: the next step builds on it. A
# step whose checks all held is one "ok" (with its time); a command that fails unchecked
# (set -e) fails the suite with its line.
set -euo pipefail
top=${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$top"
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
need_root "mmdebstrap --mode=root, chroot"
need_cmds deb.apt mmdebstrap lintian dpkg-deb systemd-analyze
trap 'echo "FAIL - 80-deb.sh line $LINENO: $BASH_COMMAND"' ERR
suite_start=$(date +%s)
lap_start=$suite_start
lap() { local now; now=$(date +%s); ok "$1 ($((now - lap_start)) s, suite $((now - suite_start)) s)"; lap_start=$now; }

export PFX_CACHE=${PFX_CACHE:-/var/cache/pfx}
debs="$PFX_CACHE/debs/deb-bookworm-amd64"
mkdir -p "$debs"
. "$top/scripts/lib/scratch-root.sh"
scratch_root pfx-deb PFX_DEB_KEEP

# ------------------------------------------------------------------ 1. the packages
version=$(awk '/^\[workspace\.package\]/ {p=1; next} /^\[/ {p=0} p && /^version *=/ {gsub(/[" ]/, "", $0); sub(/^version=/, "", $0); print; exit}' Cargo.toml)
[ -n "$version" ] || die "no workspace version in Cargo.toml"
newer="$version+test1"
bin_args=()
[ -n "${PFX_DEB_BIN_DIR:-}" ] && bin_args=(--bin-dir "$PFX_DEB_BIN_DIR")
scripts/build-deb --arch amd64 --out "$work/v1" "${bin_args[@]}" > "$work/build1.log" 2>&1 \
  || { tail -20 "$work/build1.log"; die "scripts/build-deb --arch amd64"; }
# The newer build reuses the binaries just built: only the version differs.
scripts/build-deb --arch amd64 --out "$work/v2" --version "$newer" --bin-dir "${PFX_DEB_BIN_DIR:-$top/target/release}" > "$work/build2.log" 2>&1 \
  || { tail -20 "$work/build2.log"; die "scripts/build-deb --version $newer"; }
for p in pfx-player pfx-agent pfx-fleet; do
  [ -f "$work/v1/${p}_${version}_amd64.deb" ] || die "no $work/v1/${p}_${version}_amd64.deb"
  [ -f "$work/v2/${p}_${newer}_amd64.deb" ] || die "no $work/v2/${p}_${newer}_amd64.deb"
done
lap "build-deb amd64 ($version, $newer)"

# ------------------------------------------------------------------ 2. lintian
for d in "$work"/v1/*.deb; do
  # --fail-on error: warnings are listed in docs/install-deb.md, errors fail.
  lintian --fail-on error --tag-display-limit 0 "$d" > "$work/lintian.log" 2>&1 \
    || { cat "$work/lintian.log"; die "lintian reports errors for $(basename "$d")"; }
  sed 's/^/  lintian: /' "$work/lintian.log"
done
lap "lintian (3 packages)"

# ------------------------------------------------------------------ 3. the fresh root
bookworm_mirror
mmdebstrap --mode=root --variant=apt --arch=amd64 --include=systemd,openssh-client \
  --aptopt='Acquire::Retries "3"' --dpkgopt=force-unsafe-io \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --skip=cleanup/apt/lists \
  --setup-hook='mkdir -p "$1/var/cache/apt/archives"' \
  --setup-hook="sync-in '$debs' /var/cache/apt/archives/" \
  --customize-hook="sync-out /var/cache/apt/archives '$debs'" \
  bookworm "$root" \
  "deb $mirror bookworm main" "deb $mirror bookworm-updates main" "deb $sec bookworm-security main" \
  > "$work/mmdebstrap.log" 2>&1 || { tail -20 "$work/mmdebstrap.log"; die "mmdebstrap"; }
[ -x "$root/usr/bin/apt-get" ] || die "mmdebstrap made no usable root in $root"
[ -d "$root/run/systemd/system" ] && die "$root/run/systemd/system exists: the maintainer scripts would think systemd runs"
lap "mmdebstrap apt+systemd bookworm"

mount -t proc proc "$root/proc" && mounts+=("$root/proc")
mkdir -p "$root/pfx-debs"
cp "$work"/v1/*.deb "$work"/v2/*.deb "$root/pfx-debs/"
# Every path under the places a package may write, minus dpkg's and apt's own records.
tree() {
  (cd "$root" && find etc lib usr/lib usr/share/pfx usr/bin var/lib -xdev 2>/dev/null || true) \
    | grep -v '^var/lib/dpkg/\|^var/lib/apt/\|^etc/ld.so.cache$' | LC_ALL=C sort
}
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
apt_install() { in_root apt-get install -y -q "$@" > "$work/apt.log" 2>&1 || { tail -30 "$work/apt.log"; die "apt-get install $*"; }; }

# ------------------------------------------------------------------ 4. install
# What the root had before, to tell afterwards what the packages left behind.
tree > "$work/before.txt"
apt_install "/pfx-debs/pfx-player_${version}_amd64.deb"
for f in /usr/bin/pfx-player /lib/systemd/system/pfx-player.service /lib/systemd/system/pfx-eth-no-pause@.service \
  /usr/share/pfx/profiles/gen3-bigpacket.yaml /usr/share/pfx/profiles/legacy-2018-2023-sacn.yaml \
  /usr/share/pfx/profiles/bench-ddp.yaml /etc/pfx/show.yaml /usr/share/doc/pfx-player/copyright \
  /usr/share/doc/pfx-player/changelog.gz /lib/systemd/system/pfx-player.service.d/store.conf \
  /usr/lib/sysusers.d/pfx-player.conf; do
  check "pfx-player installed $f" [ -e "$root$f" ]
done
[ "$CHECKS_FAILED" = 0 ] || die "pfx-player's files (above)"
in_root dpkg-query -W -f='${Conffiles}\n' pfx-player | grep -q '^ /etc/pfx/show.yaml [0-9a-f]\{32\}$' \
  || die "dpkg does not list /etc/pfx/show.yaml as a conffile of pfx-player"
wants=/etc/systemd/system/sys-subsystem-net-devices-eth0.device.wants/pfx-eth-no-pause@eth0.service
[ "$(readlink "$root$wants")" = /lib/systemd/system/pfx-eth-no-pause@.service ] \
  || die "no enable link $wants -> /lib/systemd/system/pfx-eth-no-pause@.service (got '$(readlink "$root$wants" || true)')"
[ -L "$root/etc/systemd/system/multi-user.target.wants/pfx-player.service" ] || die "pfx-player.service is not enabled"
# (Through a variable: the binary is the package's, not a command the host must have.)
player_bin=/usr/bin/pfx-player
in_root "$player_bin" --version > /dev/null || die "the installed pfx-player does not run"
# The show store: a system group pfx, /var/lib/pfx root:pfx 2775 with the store's marker,
# and the player's drop-in giving it that group and write access (as in the image).
pfx_gid=$(in_root getent group pfx | cut -d: -f3)
[ -n "$pfx_gid" ] || die "pfx-player made no group pfx"
[ "$pfx_gid" -lt 1000 ] || die "the group pfx is gid $pfx_gid, not a system group"
store_mode=$(stat -c '%u:%g %a' "$root/var/lib/pfx" 2>/dev/null || echo missing)
[ "$store_mode" = "0:$pfx_gid 2775" ] || die "/var/lib/pfx is '$store_mode', expected root:pfx (0:$pfx_gid) mode 2775"
[ -f "$root/var/lib/pfx/.pfx-data" ] || die "/var/lib/pfx has no store marker .pfx-data (the player and agent would say the store is not mounted)"
for want in SupplementaryGroups=pfx ReadWritePaths=-/var/lib/pfx; do
  grep -qx "$want" "$root/lib/systemd/system/pfx-player.service.d/store.conf" || die "the player's drop-in store.conf has no $want"
done
lap "apt install pfx-player $version"

# ------------------------------------------------------------------ 5. systemd-analyze verify
# The units as installed, in the installed root (ExecStart binaries, Documentation, syntax).
systemd-analyze verify --root="$root" pfx-player.service pfx-eth-no-pause@eth0.service > "$work/verify.log" 2>&1 \
  || { cat "$work/verify.log"; die "systemd-analyze verify --root on the installed units"; }
[ -s "$work/verify.log" ] && sed 's/^/  verify: /' "$work/verify.log"
lap "systemd-analyze verify --root"

# ------------------------------------------------------------------ 6. upgrade keeps the edit
# The operator's edit: another show interface and a marker line. The upgrade must keep the
# file as edited (conffile) and move PAUSE-off to the new interface.
sed -i 's/^interface: .*/interface: enp9s0/' "$root/etc/pfx/show.yaml"
echo "# operator edit before upgrade" >> "$root/etc/pfx/show.yaml"
cp "$root/etc/pfx/show.yaml" "$work/show.edited"
apt_install "/pfx-debs/pfx-player_${newer}_amd64.deb"
[ "$(in_root dpkg-query -W -f='${Version}' pfx-player)" = "$newer" ] || die "pfx-player is not at $newer after the upgrade"
cmp -s "$work/show.edited" "$root/etc/pfx/show.yaml" \
  || { diff "$work/show.edited" "$root/etc/pfx/show.yaml" || true; die "the upgrade to $newer did not keep the edited /etc/pfx/show.yaml"; }
new_wants=/etc/systemd/system/sys-subsystem-net-devices-enp9s0.device.wants/pfx-eth-no-pause@enp9s0.service
[ -L "$root$new_wants" ] || die "after the interface edit and upgrade, no $new_wants"
[ -e "$root$wants" ] || [ -L "$root$wants" ] && die "the eth0 instance is still enabled after the interface moved to enp9s0"
lap "upgrade to $newer (edit kept)"

# ------------------------------------------------------------------ 7. agent and fleet
apt_install "/pfx-debs/pfx-agent_${newer}_amd64.deb" "/pfx-debs/pfx-fleet_${newer}_amd64.deb"
for b in pfx-agent pfx-fleet; do
  in_root "/usr/bin/$b" --help > /dev/null || die "the installed $b does not run"
done
lap "apt install pfx-agent pfx-fleet"

# ------------------------------------------------------------------ 7b. a show into the store
# The agent's `show put` (the fleet's show push) as a user whose only group is pfx: stored,
# and what it made is the group's. Outside the group the same write is refused.
printf '# the agent settings of 80-deb.sh (the package ships none)\niface: eth0\n' > "$root/etc/pfx/agent.yaml"
chmod 0644 "$root/etc/pfx/agent.yaml"
printf 'pfx 80-deb: one show file\n' > "$work/show.bin"
show_hash=$(sha256sum "$work/show.bin" | cut -d' ' -f1)
show_size=$(stat -c %s "$work/show.bin")
put() { # $1: gid to run as
  in_root setpriv --reuid=65534 --regid="$1" --clear-groups \
    env SSH_ORIGINAL_COMMAND="show put $show_hash $show_size 0 $show_size" /usr/bin/pfx-agent dispatch < "$work/show.bin"
}
if put 65534 > "$work/put-nogroup.json" 2>&1; then die "a user outside the group pfx could write a show to /var/lib/pfx: $(cat "$work/put-nogroup.json")"; fi
put "$pfx_gid" > "$work/put.json" 2>&1 || die "the agent as the group pfx could not write a show to /var/lib/pfx: $(cat "$work/put.json")"
blob=$root/var/lib/pfx/store/sha256/$show_hash
[ -f "$blob" ] || die "after show put, no $blob: $(cat "$work/put.json")"
[ "$(stat -c %g "$blob")" = "$pfx_gid" ] || die "the stored show file is group $(stat -c %g "$blob"), not pfx ($pfx_gid)"
lap "show put into /var/lib/pfx as the group pfx"

# ------------------------------------------------------------------ 8. purge
# With a show in the store, purge leaves /var/lib/pfx as it is and says so.
rm "$root/etc/pfx/agent.yaml"
in_root apt-get purge -y -q pfx-agent pfx-fleet pfx-player > "$work/apt.log" 2>&1 || { tail -30 "$work/apt.log"; die "apt-get purge (store with a show)"; }
[ -f "$blob" ] || die "purge deleted the operator's show $blob"
grep -q 'pfx-player: /var/lib/pfx holds shows' "$work/apt.log" || { tail -30 "$work/apt.log"; die "purge kept /var/lib/pfx but did not say so"; }
# Installed again, the store and its show are kept; with the shows gone, purge removes it.
apt_install "/pfx-debs/pfx-player_${newer}_amd64.deb"
[ -f "$blob" ] || die "installing pfx-player again lost the show in /var/lib/pfx"
[ "$(stat -c '%u:%g %a' "$root/var/lib/pfx")" = "0:$pfx_gid 2775" ] || die "after the reinstall /var/lib/pfx is $(stat -c '%u:%g %a' "$root/var/lib/pfx")"
find "$root/var/lib/pfx" -mindepth 1 ! -type d ! -name .pfx-data -delete
apt_install "/pfx-debs/pfx-agent_${newer}_amd64.deb" "/pfx-debs/pfx-fleet_${newer}_amd64.deb"
lap "purge with a show (kept), install again"
# The player as the service would have left it: systemd's DynamicUser state directory.
mkdir -p "$root/var/lib/private/pfx-player" && ln -sfn private/pfx-player "$root/var/lib/pfx-player"
in_root apt-get purge -y -q pfx-agent pfx-fleet pfx-player > "$work/apt.log" 2>&1 || { tail -30 "$work/apt.log"; die "apt-get purge"; }
in_root dpkg-query -W -f='${db:Status-Abbrev}\n' pfx-player pfx-agent pfx-fleet 2>/dev/null | grep -q . \
  && die "dpkg still knows a pfx package after purge: $(in_root dpkg-query -W pfx-player pfx-agent pfx-fleet 2>&1)"
tree > "$work/after.txt"
left=$(comm -13 "$work/before.txt" "$work/after.txt")
[ -z "$left" ] || { printf '  left: %s\n' $left; die "purge left files the packages made (above)"; }
[ -e "$root/var/lib/pfx" ] && die "purge left /var/lib/pfx although it held no show"
grep -q 'holds shows' "$work/apt.log" && die "purge said /var/lib/pfx holds shows, but it held none"
lap "purge (nothing left)"
finish 80-deb
