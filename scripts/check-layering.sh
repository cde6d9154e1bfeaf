#!/usr/bin/env bash
# The controller's include rule (docs/ARCHITECTURE.md "Layering"): no file under src/controller/
# includes a header of src/broker/, src/api/, src/replication/, src/coordinator/, src/admin/ or
# src/storage/; src/net/ only from channel_manager.c (the real sender). The controller reaches
# brokers only through its sender interface (sender.h) and is reached through its front door
# (requests.h).
# Exit status: 0 when the rule holds, 1 (each offending file:line and include printed) when not.
# Usage: scripts/check-layering.sh [repo root, default: this script's repo]
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2
forbidden='broker|api|replication|coordinator|admin|storage'
bad=0
while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    line=${rest%%:*}
    inc=${rest#*:}
    dir=$(printf '%s' "$inc" | sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^/"]+)\/.*/\1/p')
    [ -n "$dir" ] || continue
    if [ "$dir" = net ] && [ "$file" = src/controller/channel_manager.c ]; then
        continue
    fi
    if printf '%s' "$dir" | grep -qxE "$forbidden|net"; then
        echo "layering: $file:$line includes $(printf '%s' "$inc" | sed -E 's/^[[:space:]]*//') (src/controller must not include src/$dir/)"
        bad=1
    fi
done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' src/controller/*.c src/controller/*.h 2>/dev/null)
if [ "$bad" -ne 0 ]; then
    echo "layering: FAILED (see docs/ARCHITECTURE.md, Layering)"
    exit 1
fi
echo "layering: ok (src/controller includes nothing of broker, api, replication, coordinator, admin, storage; net only in channel_manager.c)"
