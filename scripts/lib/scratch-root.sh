# Sourced by the suites that build a throwaway Debian root (05-fresh-root, 80-deb), after
# scripts/lib/check.sh: the scratch directory, the mounts made inside it, the cleanup that
# never deletes through a mount, and the mirror this machine already uses (as pfx-image does).
#
#   scratch_root PREFIX KEEP_VAR   sets $work, $root, $mounts and an EXIT trap; with
#                                  ${!KEEP_VAR}=1 the root is kept for a look
#   bookworm_mirror                sets $mirror and $sec (debian-security)

scratch_root() {
  work=$(mktemp -d "/var/tmp/$1.XXXXXX")
  root="$work/root"
  mounts=()
  scratch_keep_var=$2
  trap scratch_cleanup EXIT
}

scratch_cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[$i]}" 2>/dev/null || umount -l "${mounts[$i]}" || true
  done
  if [ "${!scratch_keep_var:-0}" = 1 ]; then echo "root kept: $root"; return; fi
  # Never delete through a mount that is still there (a .deb cache may be bound in).
  # A root left with its mounts fails the suite (check.sh's fail; the EXIT trap's exit 1).
  if findmnt -n -o TARGET --list | grep -q "^$work/"; then
    fail "root $root still has mounts: not removed"
    exit 1
  else
    rm -rf --one-file-system "$work"
  fi
}

bookworm_mirror() {
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  sec=${mirror%/debian}/debian-security
}
