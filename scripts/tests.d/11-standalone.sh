#!/usr/bin/env bash
# The repository stands alone: no code comment, script, test or document may point at
# something a clone does not have — design or note files kept beside the checkout, a
# folder of fixtures beside it, or an issue tracker's numbers. Write the fact into docs/
# instead (docs/design.md, docs/formats.md, docs/architecture.md).
# No exceptions: the optional real-export suite is pointed at its folder by
# $PFX_FSEQ_FIXTURES, never by a path outside the checkout.
set -uo pipefail
top=${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$top"
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
# The patterns are spelled with character classes so this file does not match itself.
refs='\bDESIG[N]\b|share[d]/(notes|fixtures)|\.\./share[d]\b|(^|[^A-Za-z0-9_/])note[s]/[A-Za-z0-9_.-]+\.md|\(issu[e] #?[0-9]+\)|\bissu[e] #?[0-9]+\b'
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  files=$(git ls-files --cached --others --exclude-standard | grep -v '^target/')
else
  files=$(find . -type f -not -path './target/*' -not -path './.git/*' -printf '%P\n')
fi
n=$(printf '%s\n' "$files" | grep -c .)
# A scan of nothing finds nothing: the file list must be the checkout's.
check "the scan covers the checkout ($n files, among them Cargo.toml and this suite)" \
  bash -c '[ "$1" -gt 100 ] && grep -qx Cargo.toml <<<"$2" && grep -qx scripts/tests.d/11-standalone.sh <<<"$2"' _ "$n" "$files"
# grep: 0 a hit, 1 none, 2 an error (an unreadable file is an error, not a clean file).
bad=$(printf '%s\n' "$files" | while IFS= read -r f; do
  [ -f "$f" ] || continue
  grep -InHE "$refs" "$f"
  [ $? -le 1 ] || echo "$f: grep could not read it"
done)
if [ -n "$bad" ]; then
  printf '%s\n' "$bad"
  fail "$(printf '%s\n' "$bad" | wc -l) reference(s) to things outside the repository (above): put the fact into docs/ and cite that, or drop the reference"
else
  ok "no reference outside the repository in $n files"
fi
# The pattern itself finds what it is for (else a broken pattern passes every file).
probe=$(printf 'see %s #12\nsee ../%s/x\n' "issu""e" "share""d")
check "the pattern finds a tracker number and a path beside the checkout" \
  bash -c '[ "$(grep -cE "$1" <<<"$2")" = 2 ]' _ "$refs" "$probe"
finish 11-standalone
