#!/usr/bin/env bash
# Fresh machine: do scripts/deps/ and scripts/install-deps give a bare Debian 12 every
# command the suites and pfx-image run? A minimal bookworm root (mmdebstrap, native amd64,
# minbase), a copy of the checkout's files in it, install-deps run inside (apt from the
# Debian mirror, pip from PyPI); then every command found in the sources by
# scripts/deps/find-commands.py, and every host tool pfx-image declares
# (`pfx-image tools --json`), must be there. A new command in a suite, or a tool a tool
# needs (mmdebstrap needs arch-test for an arm64 root), fails here, not on the next fresh
# machine. Two minutes or so with the .deb cache warm.
#
# Env: PFX_CACHE (the .deb cache, as for image builds), PFX_FRESH_KEEP=1 (keep the root).
set -uo pipefail
top=${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$top"
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
# The scanner's own tests first (no root needed): a command it cannot see is a command
# this suite cannot ask for.
check "pytest scripts/deps/test_find_commands.py" python3 -m pytest -q -p no:cacheprovider scripts/deps/test_find_commands.py
if [ "$(id -u)" != 0 ]; then
  [ "$CHECKS_FAILED" = 0 ] || die "the scanner's tests failed (the fresh root needs root)"
  need_root "mmdebstrap --mode=root, chroot"
fi
need_cmds image.apt mmdebstrap chroot
suite_start=$(date +%s)
lap_start=$suite_start
lap() { local now; now=$(date +%s); printf 'TIMING %-40s %4d s (suite %4d s)\n' "$1" $((now - lap_start)) $((now - suite_start)); lap_start=$now; }

# Commands the check does not ask of install-deps, each for its reason:
allowed=(
  cargo rustup          # the Rust toolchain comes from rustup (README), before any suite
  qemu-system-aarch64   # 60-image installs it from bookworm-backports (bookworm's 7.2 conflicts with qemu-utils 10)
  promtool              # 30-profiler uses it only when installed (Debian's prometheus is ~96 MB)
)

export PFX_CACHE=${PFX_CACHE:-/var/cache/pfx}
# Two caches: the base root's few .debs are copied in and out by mmdebstrap; install-deps'
# many (chromium, the cross compiler) are bound into the root's apt cache.
debs="$PFX_CACHE/debs/fresh-bookworm-amd64"
mkdir -p "$debs/base" "$debs/deps" || die "mkdir $debs"
. "$top/scripts/lib/scratch-root.sh"
scratch_root pfx-fresh-root PFX_FRESH_KEEP

# ------------------------------------------------------------------ 1. the fresh root
bookworm_mirror
# The .debs are kept across runs, like the image builds' (sync-in before, sync-out after).
# The root is thrown away: dpkg need not fsync, nor unpack manuals and translations; the
# package lists stay, so install-deps' apt-get update only revalidates them.
mmdebstrap --mode=root --variant=minbase --arch=amd64 --skip=essential/unlink \
  --aptopt='Acquire::Retries "3"' --dpkgopt=force-unsafe-io \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --skip=cleanup/apt/lists \
  --setup-hook='mkdir -p "$1/var/cache/apt/archives"' \
  --setup-hook="sync-in '$debs/base' /var/cache/apt/archives/" \
  --customize-hook="sync-out /var/cache/apt/archives '$debs/base'" \
  bookworm "$root" \
  "deb $mirror bookworm main" "deb $mirror bookworm-updates main" "deb $sec bookworm-security main" \
  > "$work/mmdebstrap.log" 2>&1 || { tail -20 "$work/mmdebstrap.log"; die "mmdebstrap"; }
[ -x "$root/usr/bin/apt-get" ] || die "mmdebstrap made no usable root in $root"
ok "mmdebstrap made a minbase bookworm root"
lap "mmdebstrap minbase bookworm"

# ------------------------------------------------------------------ 2. install-deps inside
# The checkout's own files, as a clone has them (not target/, not what git ignores).
mkdir -p "$root/pfx" || die "mkdir $root/pfx"
if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$top" ls-files -z --cached --others --exclude-standard \
    | (cd "$top" && tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -C "$root/pfx" -xf -
else
  tar -C "$top" --exclude=./target --exclude=./.git -cf - . | tar -C "$root/pfx" -xf -
fi
[ -x "$root/pfx/scripts/install-deps" ] || die "the checkout copy has no scripts/install-deps"
rm -f "$root/etc/resolv.conf"
cat /etc/resolv.conf > "$root/etc/resolv.conf"
# A machine behind a TLS-inspecting proxy trusts its CA in /usr/local/share/ca-certificates;
# the fresh root trusts what the host trusts there (a CI VM has none) so pip reaches PyPI.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
# Daemons the packages bring (sshd) must not start: the chroot shares this machine's network.
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
mount -t proc proc "$root/proc" && mounts+=("$root/proc") || die "mount proc in the root"
mount --bind "$debs/deps" "$root/var/cache/apt/archives" && mounts+=("$root/var/cache/apt/archives") \
  || die "bind the .deb cache into the root"
envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8)
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [ -n "${!v:-}" ] && envs+=("$v=${!v}")
done
chroot "$root" env -i "${envs[@]}" /pfx/scripts/install-deps > "$work/install.log" 2>&1 \
  || { tail -30 "$work/install.log"; die "scripts/install-deps in a fresh bookworm root"; }
ok "scripts/install-deps in a fresh bookworm root"
rm -f "$root/usr/sbin/policy-rc.d"
lap "scripts/install-deps in the fresh root"

# ------------------------------------------------------------------ 3. every command there
image_bin=${PFX_IMAGE_BIN:-$top/target/debug/pfx-image}
if [ ! -x "$image_bin" ]; then
  cargo build -q -p pfx-image || die "building pfx-image (for its tool list)"
fi
"$image_bin" tools --json > "$work/tools.json" || die "pfx-image tools --json"
# pfx-image names the Debian package of each tool: it must be in a list of its own, not
# arrive by luck as another package's dependency.
check "every package pfx-image names for a tool is in a scripts/deps/*.apt list" \
  python3 - "$work/tools.json" "$top"/scripts/deps/*.apt <<'PY'
import json, re, sys
listed = set()
for f in sys.argv[2:]:
    # NAME/SUITE entries (install-deps: a backports version) list NAME.
    listed |= {w.split("/")[0] for w in re.sub(r"#.*", "", open(f).read()).split()}
bad = sorted({(p, t["command"]) for t in json.load(open(sys.argv[1]))
              for p in t["package"].split() if not p.startswith(("(", "http")) and p not in listed})
for p, c in bad:
    print(f"  package {p} (for {c}) is in no scripts/deps/*.apt", file=sys.stderr)
print(f"pfx-image names {len(json.load(open(sys.argv[1])))} tools", file=sys.stderr)
sys.exit(1 if bad else 0)
PY
python3 "$top/scripts/deps/find-commands.py" --top "$top" --tools-json "$work/tools.json" --json > "$work/commands.json" \
  || die "scripts/deps/find-commands.py"
# name<TAB>where, minus the allowed ones.
python3 - "$work/commands.json" "${allowed[@]}" > "$work/wanted" <<'PY'
import json, sys
found = json.load(open(sys.argv[1]))
allowed = set(sys.argv[2:])
for name, where in sorted(found.items()):
    if name in allowed:
        continue
    print(f"{name}\t{', '.join(where[:4])}")
PY
[ $? = 0 ] || die "reading find-commands.py's JSON"
n=$(wc -l < "$work/wanted")
# A scan that finds (almost) nothing passes every root: it must find what the suites run.
check "find-commands.py finds the suites' commands ($n; more than 40, among them ip and mmdebstrap)" \
  bash -c '[ "$1" -gt 40 ] && cut -f1 "$2" | grep -qx ip && cut -f1 "$2" | grep -qx mmdebstrap' _ "$n" "$work/wanted"
# Looked up inside the root, so its symlinks (alternatives) resolve there. `a|b`: either.
missing=$(cut -f1 "$work/wanted" | chroot "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/sh -c '
  while read -r alts; do
    ok=0
    for c in $(echo "$alts" | tr "|" " "); do
      case $c in
        /*) [ -x "$c" ] && ok=1 ;;
        *) command -v "$c" >/dev/null 2>&1 && ok=1 ;;
      esac
    done
    [ $ok = 1 ] || echo "$alts"
  done')
rc=$?
lap "checked $n commands"
[ $rc = 0 ] || fail "looking the commands up inside the root (exit $rc)"
if [ -n "$missing" ]; then
  echo "commands the suites or pfx-image run that scripts/install-deps did not give a fresh Debian 12:"
  for c in $missing; do
    printf '  %s (used at %s)\n' "$c" "$(awk -F'\t' -v c="$c" '$1 == c {print $2}' "$work/wanted")"
  done
  fail "add their Debian packages to scripts/deps/*.apt (or, if a suite installs one itself, to the allowed list in $0)"
else
  ok "all $n commands the suites and pfx-image run are in a fresh bookworm root after scripts/install-deps ($(( $(date +%s) - suite_start )) s)"
fi
finish 05-fresh-root
