#!/usr/bin/env bash
# Applies the style of .clang-format (clang-format 14) to every C++ file of the project, or with
# --check lists the files that do not follow it and fails (make test runs it: ctest -R format).
#   scripts/format.sh           format in place (make format)
#   scripts/format.sh --check   change nothing; exit 1 naming each file that would change
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$CLANG_FORMAT" >/dev/null; then
  echo "format: $CLANG_FORMAT is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
# The tracked files in a git checkout, else every C++ file of the project's folders.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.h')
else
  mapfile -t files < <(find bench examples fuzz include src tests tools -name '*.cpp' -o -name '*.h' | sort)
fi
if [ "${1:-}" != --check ]; then
  "$CLANG_FORMAT" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$CLANG_FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'format: %s does not follow .clang-format\n' "${bad[@]}" >&2
  echo "format: ${#bad[@]} of ${#files[@]} files differ; make format fixes them" >&2
  exit 1
fi
echo "format: all ${#files[@]} C++ files follow .clang-format"
