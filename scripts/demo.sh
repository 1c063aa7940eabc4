#!/usr/bin/env bash
# `make demo`: the main job end to end on the embedded defaults (no GPU, no Docker needed).
#
# Builds the public validation set and the demo exam, runs the scripted agent for one run on the
# demo-cpu-3 track (5 minutes of budget, graded on the demo exam), validates the result and builds
# the site from it. Everything goes under $DEMO_DIR (default .ari/demo, git-ignored): the
# committed results/ folder only ever holds real published runs, so the demo's result lands in
# $DEMO_DIR/results (the run copies its track's registry entry there) and the site is built from
# there. Each demo takes the next seed the folder has no run of, so that repeated demos build a
# real row of distinct seeds (3 make it non-provisional) instead of repeats of seed 0; a seed
# whose run was interrupted is taken again first (scripts/demo-seed.py). Ctrl-C stops the demo.
#
# The run is a run of this machine like any other: the toolkit's own state folder ($ARI_HOME,
# default ~/.cache/ari-bench) holds the key that signs it, the journal of this host's runs and
# the caches. So every command the README suggests afterwards, typed as it is written
# (`toolkit leaderboard --results .ari/demo/results`, `runs validate`, `runs verify`, `runs
# list/show/tail`, `toolkit view`), trusts and sees what the site built here shows. (A demo
# with a state folder of its own signed with a key no later command trusted.)
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO_DIR=${DEMO_DIR:-.ari/demo}
BIN=${BIN:-.venv/bin}
RESULTS=$DEMO_DIR/results
OLD_HOME=$DEMO_DIR/home  # the state folder older demos kept for themselves
if [ -d "$OLD_HOME" ] && [ -d "$RESULTS" ] &&
    [ "$(realpath -m "${ARI_HOME:-$HOME/.cache/ari-bench}")" != "$(realpath -m "$OLD_HOME")" ]; then
    # Its runs carry its key, which no later command trusts: kept aside, never counted here.
    aside="$DEMO_DIR/results-old-key-$(date +%Y%m%dT%H%M%S)"
    mv "$RESULTS" "$aside"
    mv "$OLD_HOME" "$aside/home"
    echo "note: an older demo's runs (signed by its own key, in $OLD_HOME) moved to $aside;" \
        "this demo starts a new row signed by this machine's key" >&2
fi
mkdir -p "$DEMO_DIR" "$RESULTS"
# Bold step titles on a terminal only: piped into a file, the output stays plain text.
if [ -t 1 ]; then
    step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
    step() { printf '\n== %s\n' "$*"; }
fi
started=$(date +%s)
# Ctrl-C stops the demo: the run being stopped records itself `invalid` (its seed is rerun by
# the next demo), and nothing after it (validation, the site) runs on a half-made state. Bash
# runs the trap once the command in the foreground has returned.
stopped() {
    printf '\ndemo interrupted: stopped here (a run stopped is recorded invalid: the next demo' >&2
    printf ' reruns its seed first)\n' >&2
    exit 130
}
trap stopped INT TERM
# Exams are kept per exam_builder version: a newer engine builds other exams (and the demo
# track pins the newer one), so an exam left by an older checkout must not be reused.
BUILDER=$("$BIN/python" -c 'import exam_builder; print(exam_builder.BUILDER_VERSION)')

step "1/5 public validation set (exam_builder/banks/public/validation)"
if [ -f "$DEMO_DIR/public_val-$BUILDER/exam.jsonl" ]; then
    echo "already built: $DEMO_DIR/public_val-$BUILDER"
else
    "$BIN/toolkit" build-exam --bank exam_builder/banks/public/validation \
        --out "$DEMO_DIR/public_val-$BUILDER" --allow-in-repo
fi

step "2/5 demo exam (exam_builder/banks/public/demo)"
if [ -f "$DEMO_DIR/exam-$BUILDER/exam.jsonl" ]; then
    echo "already built: $DEMO_DIR/exam-$BUILDER"
else
    "$BIN/toolkit" build-exam --bank exam_builder/banks/public/demo \
        --out "$DEMO_DIR/exam-$BUILDER" --allow-in-repo
fi

# An interrupted seed (its only results `invalid`) is rerun before a new one is taken.
seed=$("$BIN/python" scripts/demo-seed.py "$RESULTS/demo-cpu-3")
step "3/5 one run: scripted agent, local backend, track demo-cpu-3, seed $seed (about 5 minutes)"
status=0
# The scripted agent uses no model: its run is recorded as the row "scripted-baseline".
"$BIN/toolkit" run --agent scripted --backend local --track demo-cpu-3 --seed "$seed" \
    --exam "$DEMO_DIR/exam-$BUILDER/exam.jsonl" --results "$RESULTS" || status=$?
if [ "$status" -ge 128 ]; then  # the run was stopped by a signal (Ctrl-C, SIGTERM)
    stopped
elif [ "$status" -ne 0 ]; then
    echo "the run did not end valid or failed (status $status): see the result above" >&2
fi

step "4/5 validate every result file against the run model"
"$BIN/toolkit" runs validate "$RESULTS"
latest=$(ls -t "$RESULTS"/demo-cpu-3/*.json | head -n 1)
echo "latest result: $latest"

step "5/5 leaderboard site"
if [ -f mkdocs.yml ]; then
    # mkdocs takes a relative --site-dir from its config's folder: made absolute here (a
    # DEMO_DIR given absolute stays as it is).
    case $DEMO_DIR in /*) site_dir=$DEMO_DIR/site ;; *) site_dir=$(pwd)/$DEMO_DIR/site ;; esac
    ARI_RESULTS_DIR="$RESULTS" "$BIN/mkdocs" build --quiet --site-dir "$site_dir"
    echo "site: $DEMO_DIR/site/index.html"
else
    echo "no mkdocs.yml yet: skipped"
fi

printf '\ndemo finished in %ss; result: %s\n' "$(( $(date +%s) - started ))" "$latest"
# What to type next: each answers as the site above does (same results, same trusted key).
echo "the board in the terminal: $BIN/toolkit leaderboard --results $RESULTS"
echo "this host's runs: $BIN/toolkit runs list · live view: $BIN/toolkit view --results $RESULTS"
exit "$status"
