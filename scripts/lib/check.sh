# Sourced by every suite under scripts/tests.d/: one pass/fail vocabulary, so a reader (or
# grep over a CI log) finds every check and every failure the same way in every suite.
#
#   ok MSG            a check that held                      "ok   - MSG"
#   fail MSG          a check that did not; the suite goes on "FAIL - MSG" (counted)
#   die MSG           the suite cannot go on                 "FAIL - MSG", exit 1
#   check MSG CMD...  ok or fail by CMD's exit status
#   skip WHY          the suite cannot run here              "skipped: WHY", exit 77
#   need_root WHAT    skip unless root                       "skipped: needs root (WHAT)"
#   need_cmds APT CMD...   die naming each missing command and the apt list that installs it
#   wait_for SECS WHAT CMD...
#                     poll CMD (every 50 ms) until it holds; after SECS, fail naming WHAT
#                     and return 1. Waiting for a condition, never for a time: a fixed sleep
#                     orders nothing on a slow machine and wastes time on a fast one.
#   judge WHAT CMD... run CMD, a checker in another language (stdin passes through, so a
#                     here-document works), and count each line it prints as one of this
#                     suite's checks: "ok<TAB>X" or "ok   X" an ok, "fail<TAB>X" or "FAIL X" a
#                     fail, any other line shown as it is; then check that CMD exited 0 (a
#                     checker that died half-way has not judged everything)
#   finish [NAME]     "NAME: N checks, M failed"; exit 0 only when none failed and at least
#                     one check ran (a suite that checked nothing has not passed)
#
# Exit codes follow scripts/test-all: 0 passed, 77 skipped, anything else failed.

CHECKS_OK=0
CHECKS_FAILED=0

ok() { echo "ok   - $*"; CHECKS_OK=$((CHECKS_OK + 1)); }
fail() { echo "FAIL - $*"; CHECKS_FAILED=$((CHECKS_FAILED + 1)); }
die() { echo "FAIL - $*"; CHECKS_FAILED=$((CHECKS_FAILED + 1)); exit 1; }
check() { local msg=$1; shift; if "$@"; then ok "$msg"; else fail "$msg"; fi; }
skip() { echo "skipped: $*"; exit 77; }

need_root() {
  [ "$(id -u)" = 0 ] || skip "needs root${1:+ ($1)}"
}

need_cmds() {
  local apt=$1 missing=() c
  shift
  for c in "$@"; do command -v "$c" > /dev/null 2>&1 || missing+=("$c"); done
  [ ${#missing[@]} = 0 ] || die "missing: ${missing[*]} (installed by scripts/deps/$apt)"
}

wait_for() {
  local secs=$1 what=$2 end
  shift 2
  end=$(( $(date +%s%N) + secs * 1000000000 ))
  while :; do
    "$@" > /dev/null 2>&1 && return 0
    [ "$(date +%s%N)" -lt "$end" ] || { fail "$what: not within ${secs}s"; return 1; }
    sleep 0.05
  done
}

judge() {
  local what=$1 out line rc
  shift
  out=$(mktemp) || die "$what: no temporary file"
  "$@" > "$out" 2>&1
  rc=$?
  while IFS= read -r line; do
    case $line in
      ok$'\t'*) ok "${line#ok$'\t'}" ;;
      "ok   "*) ok "${line#ok   }" ;;
      fail$'\t'*) fail "${line#fail$'\t'}" ;;
      "FAIL "*) fail "${line#FAIL }" ;;
      *) echo "$line" ;;
    esac
  done < "$out"
  rm -f "$out"
  check "$what: the checker ran to its end (exit $rc)" [ "$rc" = 0 ]
}

finish() {
  local name=${1:-$(basename "$0" .sh)}
  echo "$name: $((CHECKS_OK + CHECKS_FAILED)) checks, $CHECKS_FAILED failed"
  if [ "$CHECKS_OK" = 0 ] && [ "$CHECKS_FAILED" = 0 ]; then
    echo "FAIL - $name ran no check"
    exit 1
  fi
  [ "$CHECKS_FAILED" = 0 ] || exit 1
  exit 0
}
