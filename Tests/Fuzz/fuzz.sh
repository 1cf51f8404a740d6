#!/usr/bin/env bash
# Builds Salvo's fuzz targets (libFuzzer with AddressSanitizer, release) and runs each for a
# bounded time: `make fuzz` runs this.
#
#   Tests/Fuzz/fuzz.sh [--seconds N] [--runs N] [TARGET...]
#
# --seconds N: how long each target runs (default: $FUZZ_SECONDS, else 60).
# --runs N:    stop each target after N executions, or at the time limit if sooner.
# TARGET:      some of the targets below (default: all of them).
#
# Each target starts from its committed seeds (Tests/Fuzz/Corpus/TARGET) and from what
# earlier runs on this machine found (Tests/Fuzz/.build/corpus/TARGET), and ends with one
# line: executions, coverage (libFuzzer's cov: edges, ft: features), corpus size. A crash
# or a broken property stops that target, keeps the input under Tests/Fuzz/.build/crashes/,
# prints the command that replays it, and makes the script exit 1 after the other targets.
set -euo pipefail

cd "$(dirname "$0")"
TARGETS=(FrameDecoderFuzzer GatewayReplyFuzzer JSONScannerFuzzer CampaignLineFuzzer CheckpointFuzzer
         PayloadBuilderFuzzer ClientSessionFuzzer HPACKDecoderFuzzer HTTP1RequestFuzzer JSONBatchFuzzer)
SECONDS_PER_TARGET=${FUZZ_SECONDS:-60}
RUNS=""
SELECTED=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) SECONDS_PER_TARGET=$2; shift 2 ;;
        --runs) RUNS=$2; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
        *) SELECTED+=("$1"); shift ;;
    esac
done
[ ${#SELECTED[@]} -gt 0 ] || SELECTED=("${TARGETS[@]}")
for target in "${SELECTED[@]}"; do
    [[ " ${TARGETS[*]} " == *" $target "* ]] || { echo "fuzz.sh: no target $target (${TARGETS[*]})" >&2; exit 2; }
done

SWIFT=${SWIFT:-swift}
SCRATCH=.build
mkdir -p "$SCRATCH"
# The toolchain's lld: Debian's gold, swiftc's default linker, stops with "internal error
# in format_file_lineno" on libFuzzer's runtime.
SWIFTC=$(command -v "$(dirname "$(command -v "$SWIFT")")/swiftc" || command -v swiftc)
LLD="$(dirname "$(readlink -f "$SWIFTC")")/ld.lld"
[ -x "$LLD" ] || { echo "fuzz.sh: no ld.lld next to $SWIFTC" >&2; exit 2; }
printf '{ "schemaVersion": "1.0", "linker": { "path": "%s" } }\n' "$LLD" > "$SCRATCH/lld-toolset.json"

echo "fuzz: building ${SELECTED[*]} (release, -sanitize=fuzzer,address)"
for target in "${SELECTED[@]}"; do
    "$SWIFT" build -c release --scratch-path "$SCRATCH" --toolset "$SCRATCH/lld-toolset.json" \
        -Xswiftc -sanitize=fuzzer,address --product "$target" 2>&1 | grep -v -E '^\[|^Building for|^Build of product' || true
    [ -x "$SCRATCH/release/$target" ] || { echo "fuzz.sh: building $target failed" >&2; exit 1; }
done

# CampaignLineFuzzer's HTTP/2 lines, and JSONBatchFuzzer's notifications, need room for a
# payload over voip's 5120-byte limit.
max_len() {
    case "$1" in
        CampaignLineFuzzer|JSONBatchFuzzer) echo 8192 ;;
        *) echo 4096 ;;
    esac
}

dictionary() {
    case "$1" in
        JSONScannerFuzzer|CampaignLineFuzzer|JSONBatchFuzzer) echo Dictionaries/json.dict ;;
        CheckpointFuzzer) echo Dictionaries/checkpoint.dict ;;
    esac
}

# Swift's crash backtracer reads its own stack in a way AddressSanitizer reports as a
# stack-buffer-underflow, hiding the real failure: libFuzzer's report is enough.
export SWIFT_BACKTRACE=enable=no
failed=()
for target in "${SELECTED[@]}"; do
    corpus="$SCRATCH/corpus/$target"
    crashes="$SCRATCH/crashes/$target"
    mkdir -p "$corpus" "$crashes"
    options=(-max_len="$(max_len "$target")" -timeout=10 -print_final_stats=1 -artifact_prefix="$crashes/"
             -max_total_time="$SECONDS_PER_TARGET")
    [ -z "$RUNS" ] || options+=(-runs="$RUNS")
    dict=$(dictionary "$target")
    [ -z "$dict" ] || options+=(-dict="$dict")
    log="$SCRATCH/$target.log"
    if "$SCRATCH/release/$target" "${options[@]}" "$corpus" "Corpus/$target" > "$log" 2>&1; then
        status=ok
    else
        status=crash
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    seconds=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
    progress=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$progress")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$progress")
    corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<< "$progress")
    if [ "$status" = ok ]; then
        echo "fuzz: $target: ${runs:-?} executions in ${seconds:-?} s, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?} inputs, no crash"
    else
        failed+=("$target")
        echo "fuzz: $target FAILED after ${runs:-?} executions; the end of its log ($PWD/$log):"
        grep -v -E '^#[0-9]+|^INFO:' "$log" | tail -25
        crash=$(ls -t "$crashes" | head -1)
        [ -z "$crash" ] || echo "fuzz: replay with: $PWD/$SCRATCH/release/$target $PWD/$crashes/$crash"
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: ${#failed[@]} of ${#SELECTED[@]} targets failed: ${failed[*]}"
    exit 1
fi
echo "fuzz: ${#SELECTED[@]} targets, no crash"
