#!/usr/bin/env bash
# run.sh BIN [extra send flags]: 1.5M tokens, 21-byte payload, mock holding answers 300 ms; prints rate, connections, peak RSS and a smaps breakdown near the peak.
# The rig is ../memory-2026-11-29/run.sh (the same run, making its fixtures when missing).
exec "$(dirname "$0")/../memory-2026-11-29/run.sh" "$@"
