# Sourced by the suites that run the player binary: which one, built if there is none.
#
#   player_bin    sets $bin: $PFX_PLAYER when set (test-all sets it to its one debug
#                 build), else a release build, else the debug build, building that when
#                 neither exists. Fails, naming the path, when none can be had.

player_bin() {
  if [ -n "${PFX_PLAYER:-}" ]; then
    bin=$PFX_PLAYER
    [ -x "$bin" ] || { echo "FAILED: PFX_PLAYER=$bin is not an executable (unset it to use the workspace's build)"; return 1; }
    return 0
  fi
  bin="$PFX_TOP/target/release/pfx-player"
  [ -x "$bin" ] && return 0
  bin="$PFX_TOP/target/debug/pfx-player"
  [ -x "$bin" ] || (cd "$PFX_TOP" && cargo build -p pfx-player --locked) || { echo "FAILED: cargo build -p pfx-player"; return 1; }
  [ -x "$bin" ] || { echo "FAILED: no pfx-player at $bin after the build"; return 1; }
}
