#!/usr/bin/env bash
# One command on a GPU machine: the GPU tests, compute-sanitizer memcheck and racecheck, then the default SGEMM benchmark against cuBLAS, the reduction
# benchmark against CUB, batched SGEMM against cuBLAS strided-batched and torch.bmm, and the tensor-core (hgemm) benchmarks against cuBLAS in bf16, fp16
# and tf32, logs in one folder (at most eight files, a lent machine's limit on returned output:
# summary, pytest, sanitizer, bench log and tables, results.db, API tables and log; the profile
# part, not in the default, adds profile.log: run it apart).
#   scripts/gpu_check.sh [OUTDIR]          (default ./gpu-check)
# Extra arguments after OUTDIR go to the SGEMM `gemmlab bench` (e.g. --sizes 1024,4096).
# Runs from the source tree (PYTHONPATH=src), as the GPU machines have no package index.
# GPU_CHECK_PARTS="tests", "sanitizer", "bench" or "api" runs one part; the default runs all
# four. "tests" is tests/gpu without the sanitizer module (the CPU tests run in .ci/run on any
# machine; GPU_CHECK_CPU=1 adds them here); it no longer fits a 10-minute device call (575 s for
# 85% of it on an H200, session 10), so "tests-hgemm" (tests/gpu/test_hgemm_*.py), "tests-profile"
# (tests/gpu/test_profile.py, the ncu runs) and "tests-other" (the rest; its halves "tests-other-api"
# and "tests-other-kernels") run its parts, each
# within one (tests-other: 240 s to past 450 s on one H200 and tree in session 28, as the lent
# VM's CPU ran fast or slow: scripts/host_speed.py; give it the whole call). Likewise "sanitizer" (six of its
# eight runs took 560 s on an H100, session 10; it has fourteen since) splits into "sanitizer-memcheck" and "sanitizer-racecheck", and
# racecheck (570 s on an H100, session 11) again into "sanitizer-racecheck-hgemm" (the tensor-core
# rungs' sweep) and "sanitizer-racecheck-other" (sgemm, bgemm, reduce). The hgemm sweep under
# racecheck outgrew one call too (rung 5 alone: 1028 runs per 16-bit type, about 330 s each on an
# H100, session 16; the whole bf16 part 467 s, session 27): "sanitizer-racecheck-hgemm-fp16", "-bf16"
# and "-tf32" run one input type each,
# and "-rows256" rung 5's 256-row tiles in both 16-bit types (240 runs, 396 s on an H100, session 27).
# "profile" (not in the default) is `gemmlab profile --op hgemm --impl persistent,cublas --from-table --source` at
# issue 14's weakest shapes and 4096^3 (profile.log, rows in results.db).
# "sanitizer" is compute-sanitizer memcheck and
# racecheck over every op (tests/gpu/test_sanitizer.py), "api" is `gemmlab bench --api all`
# (the entry points as a program calls them, against torch and CuPy). The tests part repeats the
# 16-thread first-use test GEMMLAB_THREAD_REPEATS times (default 20 here, 3 in a plain pytest run).
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-./gpu-check}" && cd "${1:-./gpu-check}" && pwd)
shift || true
work=$(mktemp -d)
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# The machines have no package index: wheels of the cluster extra (dask, distributed, bokeh),
# downloaded elsewhere into $GEMMLAB_WHEELHOUSE (default ./.whl: scripts/cluster_wheels.sh) and carried over, are installed
# into a scratch folder so the Dask GPU test runs instead of skipping.
wheels=${GEMMLAB_WHEELHOUSE:-$root/.whl}
if compgen -G "$wheels/*.whl" > /dev/null; then
    "${PYTHON:-python3}" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$work/site" \
        "$wheels"/*.whl && export PYTHONPATH="$work/site:$PYTHONPATH" \
        || echo "gpu_check: the wheels in $wheels did not install; the Dask GPU test will skip"
fi
export GEMMLAB_SANITIZER_LOGS="$work/sanitizer" GEMMLAB_THREAD_REPEATS=${GEMMLAB_THREAD_REPEATS:-20}
py=${PYTHON:-python3}
status=0

{ date -u +%FT%TZ; nvidia-smi || true; "$py" -m gemmlab.cli env; } > "$out/summary.txt" 2>&1

parts=${GPU_CHECK_PARTS:-tests sanitizer bench api}
if [[ " $parts " == *" tests"* ]]; then
echo "== tests" | tee -a "$out/summary.txt"
targets=(tests/gpu)
[[ "${GPU_CHECK_CPU:-0}" == 1 ]] && targets=(tests)
skip=(--ignore=tests/gpu/test_sanitizer.py)
# tests-hgemm (test_hgemm_*.py), tests-profile (test_profile.py: ncu runs, a minute or two) and
# tests-other (the rest) select their files; any of them together run their union. tests-other
# came to 566 s on an H100 (session 30) against a 10-minute call, so it has two halves as well:
# tests-other-api (the API's entry points, graphs, the CLI: 293 tests in 161 s on an H100, session
# 30, 88 s of it the 16-thread first use in fresh processes) and tests-other-kernels (the rest)
if [[ " $parts " =~ " tests-"(hgemm|profile|other|other-api|other-kernels)" " && " $parts " != *" tests "* ]]; then
    targets=()
    for f in "$root"/tests/gpu/test_*.py; do
        name=$(basename "$f")
        case $name in
            test_sanitizer.py) continue ;;
            test_hgemm_*) group=hgemm ;;
            test_profile.py) group=profile ;;
            test_api*|test_reduce_api.py|test_graph_replay.py|test_launch_graph.py|test_cli_gpu.py) group=other-api ;;
            *) group=other-kernels ;;
        esac
        if [[ " $parts " == *" tests-$group "* || ( $group == other-* && " $parts " == *" tests-other "* ) ]]; then
            targets+=("tests/gpu/$name")
        fi
    done
    # the CPU tests that need torch skip in CI (its test extra has no torch) but not here, where the
    # image has it: they run with the API's half (the torch custom ops' fakes, opcheck, the audit's)
    if [[ " $parts " == *" tests-other-api "* || " $parts " == *" tests-other "* ]]; then
        for f in $(cd "$root" && grep -l 'importorskip("torch"' tests/cpu/test_*.py); do targets+=("$f"); done
    fi
    # GPU_CHECK_CPU=1 adds the CPU tests to the part that used to carry them
    [[ "${GPU_CHECK_CPU:-0}" == 1 && " $parts " == *" tests-other "* ]] && targets+=(tests/cpu)
fi
(cd "$root" && "$py" -m pytest "${targets[@]}" "${skip[@]}" -q -rs --durations=12 -p no:cacheprovider 2>&1) \
    | tee "$out/pytest.log" || status=1
tail -n 1 "$out/pytest.log" >> "$out/summary.txt"
# where the stream tests ran: each with the piece it guards turned off must fail (about 30 s)
if [[ " ${targets[*]} " =~ " tests"(/gpu)?" " || " ${targets[*]} " == *" tests/gpu/test_api_cai_streams.py "* ]]; then
    echo "== stream test mutations" | tee -a "$out/pytest.log"
    PYTHON="$py" "$root/scripts/stream_test_mutations.sh" 2>&1 | tee -a "$out/pytest.log"
    [[ ${PIPESTATUS[0]} == 0 ]] && echo "stream test mutations: all failed as expected" >> "$out/summary.txt" \
        || { echo "stream test mutations: NOT as expected (pytest.log)" >> "$out/summary.txt"; status=1; }
fi
fi

if [[ " $parts " == *" sanitizer"* ]]; then
echo "== sanitizer" | tee -a "$out/summary.txt"
# the runs the parts name (test ids: tool-op); plain "sanitizer" runs them all. One tool no longer
# fits a 10-minute device call with the other (session 10, H100), nor racecheck whole (session 11)
only=() keys=() all=0
for part in $parts; do
    case $part in
        sanitizer) all=1 ;;
        sanitizer-memcheck) keys+=("memcheck") ;;
        sanitizer-racecheck) keys+=("racecheck") ;;
        sanitizer-racecheck-hgemm) keys+=("(racecheck and hgemm)") ;;
        sanitizer-racecheck-hgemm-fp16|sanitizer-racecheck-hgemm-bf16|sanitizer-racecheck-hgemm-tf32|sanitizer-racecheck-hgemm-rows256)
            keys+=("(racecheck and ${part#sanitizer-racecheck-})") ;;
        sanitizer-racecheck-other) keys+=("(racecheck and not hgemm)") ;;
    esac
done
if [[ $all == 0 && ${#keys[@]} -gt 0 ]]; then
    expr="${keys[0]}"
    for k in "${keys[@]:1}"; do expr="$expr or $k"; done
    only=(-k "$expr")
fi
(cd "$root" && "$py" -m pytest tests/gpu/test_sanitizer.py "${only[@]}" -q -rs -p no:cacheprovider 2>&1) \
    | tee "$out/sanitizer.log" || status=1
tail -n 1 "$out/sanitizer.log" >> "$out/summary.txt"
for f in "$work"/sanitizer/*.log; do
    [ -e "$f" ] || continue
    { echo "=== $(basename "$f")"; cat "$f"; } >> "$out/sanitizer.log"
    echo "$(basename "$f"): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -n 1)" >> "$out/summary.txt"
done

fi

if [[ " $parts " == *" bench "* ]]; then
echo "== benchmarks" | tee -a "$out/summary.txt"
(cd "$work" && "$py" -m gemmlab.cli bench --db "$out/results.db" --markdown "$work/sgemm.md" "$@" 2>&1) \
    | tee "$out/bench.log" || status=1
(cd "$work" && "$py" -m gemmlab.cli bench --op reduce --impl all --n 1024,65536,1048576,16777216,268435456 \
    --db "$out/results.db" --markdown "$work/reduce.md" 2>&1) | tee -a "$out/bench.log" || status=1
(cd "$work" && "$py" -m gemmlab.cli bench --op bgemm --impl all --sizes 256x128,64x256,16x512,4x1024,2x2048,8x1000x300x200 \
    --db "$out/results.db" --markdown "$work/bgemm.md" 2>&1) | tee -a "$out/bench.log" || status=1
hsizes=1024,2048,4096,8192,4097,1000x3000x2000
for dt in bf16 fp16; do
    (cd "$work" && "$py" -m gemmlab.cli bench --op hgemm --dtype "$dt" --impl all --sizes "$hsizes" \
        --db "$out/results.db" --markdown "$work/hgemm_$dt.md" 2>&1) | tee -a "$out/bench.log" || status=1
done
(cd "$work" && "$py" -m gemmlab.cli bench --op hgemm --dtype tf32 --impl all --sizes 4096,8192,4097,1000x3000x2000 \
    --db "$out/results.db" --markdown "$work/hgemm_tf32.md" 2>&1) | tee -a "$out/bench.log" || status=1
# tf32 with A given as KxM (tt: B as NxK; tn: B as KxN, transposed inside the CTA), read in place
for layout in tt tn; do
    (cd "$work" && "$py" -m gemmlab.cli bench --op hgemm --dtype tf32 --layout "$layout" --impl tf32_wgmma,cublas \
        --sizes 1024,4096,8192,1000x3000x2000 --db "$out/results.db" --markdown "$work/hgemm_tf32_$layout.md" 2>&1) \
        | tee -a "$out/bench.log" || status=1
done
# issue 14: B given as NxK (x @ W.T, read in place) and C in the input type, against the same cuBLAS/torch calls
for variant in "--layout nt" "--out-dtype bf16" "--layout nt --out-dtype bf16"; do
    tag=$(echo "$variant" | tr -d ' -')
    (cd "$work" && "$py" -m gemmlab.cli bench --op hgemm --dtype bf16 $variant --impl persistent,cublas,torch \
        --sizes 4096,8192,1000x3000x2000 --db "$out/results.db" --markdown "$work/hgemm_bf16_$tag.md" 2>&1) \
        | tee -a "$out/bench.log" || status=1
done
cat "$work"/sgemm.md "$work"/reduce.md "$work"/bgemm.md "$work"/hgemm_*.md > "$out/bench.md" 2>/dev/null
rm -f "$out"/bench_*.txt  # the timestamped batch files repeat bench.log
fi

if [[ " $parts " == *" profile "* ]]; then
# issue 14's Nsight Compute figures: rung 5 with the table's parameters for the shape beside cuBLAS
# (bf16, fp32 C) at the three weakest shapes of the suite and at 4096^3 (the 102% target), with
# where the warps stall
# (--source); the rows go to results.db, the tables and stall lines to profile.log. Not in the
# default parts: four ncu runs with source sampling take minutes
echo "== profile" | tee -a "$out/summary.txt"
for shape in "1024 1024 1024" "1000 3000 2000" "512 512 8192" "4096 4096 4096"; do
    read -r m n k <<< "$shape"
    (cd "$work" && "$py" -m gemmlab.cli profile --op hgemm --dtype bf16 --impl persistent,cublas --from-table --source \
        --M "$m" --N "$n" --K "$k" --db "$out/results.db" 2>&1) | tee -a "$out/profile.log" || status=1
done
fi

if [[ " $parts " == *" api "* ]]; then
echo "== API benchmark" | tee -a "$out/summary.txt"
(cd "$work" && "$py" -m gemmlab.cli bench --api all --markdown "$out/api.md" 2>&1) | tee "$out/api.log" || status=1
fi

echo "gpu_check: exit $status, logs in $out" | tee -a "$out/summary.txt"
exit $status
