#!/usr/bin/env bash
# The repository stands alone: no code comment, script, test or document may point at
# something a clone does not have — design or note files kept beside the checkout, a
# folder of fixtures beside it, or an issue tracker's numbers. Write the fact into docs/
# instead (docs/design.md, docs/formats.md, docs/architecture.md).
# No exceptions: the optional real-export suite is pointed at its folder by
# $PFX_FSEQ_FIXTURES, never by a path outside the checkout.
set -euo pipefail
cd "$PFX_TOP"
# The patterns are spelled with character classes so this file does not match itself.
refs='\bDESIG[N]\b|share[d]/(notes|fixtures)|\.\./share[d]\b|(^|[^A-Za-z0-9_/])note[s]/[A-Za-z0-9_.-]+\.md|\(issu[e] #?[0-9]+\)|\bissu[e] #?[0-9]+\b'
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files --cached --others --exclude-standard)
else
  files=$(find . -type f -not -path './target/*' -not -path './.git/*' -printf '%P\n')
fi
hits=$(printf '%s\n' "$files" | grep -v '^target/' | while IFS= read -r f; do
  [ -f "$f" ] && grep -InHE "$refs" "$f" || true
done)
bad=$(printf '%s\n' "$hits" | grep -v '^$' || true)
if [ -n "$bad" ]; then
  printf '%s\n' "$bad"
  echo "FAILED: $(printf '%s\n' "$bad" | wc -l) reference(s) to things outside the repository (above)."
  echo "Put the fact into docs/ and cite that, or drop the reference."
  exit 1
fi
echo "standalone: $(printf '%s\n' "$files" | wc -l) files, no reference outside the repository"
