#!/usr/bin/env bash
# Shows that tests/gpu/test_api_cai_streams.py can fail: each mutation below turns off one piece of
# the API's stream handling (or puts back a host wait it removed), and the tests that guard it must
# then fail (a test that cannot fail is a defect). Run on a GPU machine from the repository root:
#   scripts/stream_test_mutations.sh
# Prints, per mutation, pytest's summary and "as expected" or "NOT AS EXPECTED"; exits 1 on any
# of the latter. Session 35 found the Sum test passing with its ordering removed (a CuPy kernel
# compiled inside the timed window): docs/results/h100-sum-test-diagnosis-session35.txt.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tests=tests/gpu/test_api_cai_streams.py
py=${PYTHON:-python3}
status=0

# $1: label; $2: pytest -k expression of the tests that must fail; $3: Python run before pytest
# (the mutation); PYTHONPATH as set by the caller
mutated() {
    local label=$1 expect=$2 patch=$3 out
    out=$("$py" -c "$patch
import pytest
raise SystemExit(pytest.main(['$tests', '-q', '-p', 'no:cacheprovider', '-rf', '-k', '''$expect''']))" 2>&1)
    local rc=$?
    echo "== $label: tests that must fail: $expect"
    echo "$out" | grep -E "^(FAILED|ERROR) |^[0-9]+ (passed|failed)" | tail -8  # not a source line quoted in a traceback
    if [[ $rc == 1 ]] && ! echo "$out" | grep -qE "[0-9]+ passed"; then
        echo "as expected"
    else
        echo "NOT AS EXPECTED (pytest exit $rc)"; status=1
    fi
}

export PYTHONPATH="$root/src"
# unmutated first: every test must pass (none skipped), or a failure below proves nothing
base=$("$py" -m pytest "$tests" -q -p no:cacheprovider -rfs 2>&1)
echo "== unmutated"; echo "$base" | tail -3
if echo "$base" | grep -qE "[0-9]+ (failed|skipped|error)" || ! echo "$base" | grep -qE "[0-9]+ passed"; then
    echo "stream_test_mutations: the unmutated tests must all pass here first (a GPU, CuPy)"; exit 2
fi
mutated "ordering off (streams._order a no-op)" "waits" \
    "import gemmlab.api.streams as s; s._order = lambda first, then: None"
mutated "release off (the producer no longer waits for the call)" "cs_producer or sum_plan" \
    "import gemmlab.api.streams as s; s.release = lambda launch, ordered: None"
mutated "capture skip off (streams._capturing always false)" "capture_of_the_calls_stream" \
    "import gemmlab.api.streams as s; s._capturing = lambda launch: False"
mutated "refusal off (a producer's stream under capture is ordered like any other)" "under_capture" \
"import gemmlab.api.streams as s
def join(launch, named):
    others = tuple(set(named) - {launch})
    if not others or s._capturing(launch):
        return ()
    for other in others:
        s._order(other, launch)
    return others
s.join = join"
mutated "host wait for a strided operand's stream (its view through cupy.asarray)" "without_waiting" \
    "import cupy, gemmlab.api.interface as i; i.cupy_view = lambda x, device, cp: cupy.asarray(x)"

# a rebound plan keeping the stream of the A it was made with: a source change, on a copy
copy=$(mktemp -d)
cp -r "$root/src" "$copy/src"
sed -i 's/^                current = current_stream_reader(a)$/                pass  # mutated/' "$copy/src/gemmlab/api/plans.py"
if grep -q "pass  # mutated" "$copy/src/gemmlab/api/plans.py"; then
    PYTHONPATH="$copy/src" mutated "a rebound plan keeps its first stream" "rebound" ""
else
    echo "== a rebound plan keeps its first stream: the line to mutate is gone from plans.py; update this script"; status=1
fi
rm -rf "$copy"

exit $status
