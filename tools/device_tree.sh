#!/usr/bin/env bash
# The device tool sends the tracked tree and allows 64 MiB in all, carried wheels included;
# tests/data (about 50 MB of replayed captures) is not needed on the device machine.
#
#   bash tools/device_tree.sh slim      before device calls: tests/data leaves the index (the
#                                       files stay on disk) and .git/info/exclude ignores it
#   bash tools/device_tree.sh restore   after them: tests/data is tracked again
#   bash tools/device_tree.sh status    the size that would travel, and whether it is slim
#
# While slim, a commit would delete tests/data: slim installs a pre-commit hook that refuses
# every commit until restore.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
exclude=.git/info/exclude hook=.git/hooks/pre-commit marker=.git/bitexact-slim
travelling() { git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1; }
case "${1:-status}" in
  slim)
    mkdir -p "$(dirname "$hook")"
    [ -e "$marker" ] && { echo "already slim"; exit 0; }
    git rm -r -q --cached tests/data
    echo "/tests/data/" >> "$exclude"
    printf '#!/bin/sh\necho "tests/data is untracked for the device (tools/device_tree.sh restore first)" >&2\nexit 1\n' > "$hook"
    chmod +x "$hook"
    touch "$marker"
    echo "slim: $(travelling) bytes tracked";;
  restore)
    [ -e "$marker" ] || { echo "not slim"; exit 0; }
    sed -i '\#^/tests/data/$#d' "$exclude"
    git add tests/data
    rm -f "$hook" "$marker"
    git status --short tests/data | head -3
    echo "restored: $(travelling) bytes tracked";;
  status)
    echo "$(travelling) bytes tracked (limit 67108864 with what you carry); $([ -e "$marker" ] && echo slim || echo whole)";;
  *) echo "usage: bash tools/device_tree.sh slim | restore | status" >&2; exit 2;;
esac
