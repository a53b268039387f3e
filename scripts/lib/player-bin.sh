# Sourced by the suites that run the player binary, after scripts/lib/check.sh: which one,
# built if there is none.
#
#   player_bin    sets $bin: $PFX_PLAYER when set (test-all sets it to its one debug
#                 build), else a release build, else the debug build, building that when
#                 neither exists. Dies (check.sh), naming the path, when none can be had.

player_bin() {
  local top=${PFX_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
  if [ -n "${PFX_PLAYER:-}" ]; then
    bin=$PFX_PLAYER
    [ -x "$bin" ] || die "PFX_PLAYER=$bin is not an executable (unset it to use the workspace's build)"
    return 0
  fi
  bin="$top/target/release/pfx-player"
  [ -x "$bin" ] && return 0
  bin="$top/target/debug/pfx-player"
  [ -x "$bin" ] || (cd "$top" && cargo build -p pfx-player --locked) || die "cargo build -p pfx-player"
  [ -x "$bin" ] || die "no pfx-player at $bin after the build"
}
