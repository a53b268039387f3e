#!/usr/bin/env bash
# The repository stands alone: no code comment, script, test or document may point at
# something a clone does not have — design or note files kept beside the checkout, a
# folder of fixtures beside it, or an issue tracker's numbers. Write the fact into docs/
# instead (docs/design.md, docs/formats.md, docs/architecture.md).
#
# One exception: the optional real-export suite and its documentation name the folder
# of real xLights exports it looks for (and skip when it is absent).
set -euo pipefail
cd "$PFX_TOP"
# The patterns are spelled with character classes so this file does not match itself.
refs='\bDESIG[N]\b|share[d]/(notes|fixtures)|\.\./share[d]\b|(^|[^A-Za-z0-9_/])note[s]/[A-Za-z0-9_.-]+\.md|\(issu[e] #?[0-9]+\)|\bissu[e] #?[0-9]+\b'
# Where the real exports' folder may be named, and only that folder.
allowed_files='^(scripts/tests\.d/21-fseq-real\.sh|docs/fseq\.md):'
allowed_ref='\.\./share[d]/fixtures/fseq'
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files --cached --others --exclude-standard)
else
  files=$(find . -type f -not -path './target/*' -not -path './.git/*' -printf '%P\n')
fi
hits=$(printf '%s\n' "$files" | grep -v '^target/' | while IFS= read -r f; do
  [ -f "$f" ] && grep -InHE "$refs" "$f" || true
done)
bad=$(printf '%s\n' "$hits" | grep -v '^$' | while IFS= read -r line; do
  if [[ $line =~ $allowed_files ]]; then
    # Within the allowed files, only the exports' folder; anything else still fails.
    rest=$(printf '%s' "${line#*:*:}" | sed -E "s#$allowed_ref##g")
    printf '%s' "$rest" | grep -qE "$refs" || continue
  fi
  printf '%s\n' "$line"
done)
if [ -n "$bad" ]; then
  printf '%s\n' "$bad"
  echo "FAILED: $(printf '%s\n' "$bad" | wc -l) reference(s) to things outside the repository (above)."
  echo "Put the fact into docs/ and cite that, or drop the reference."
  exit 1
fi
echo "standalone: $(printf '%s\n' "$files" | wc -l) files, no reference outside the repository"
