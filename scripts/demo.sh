#!/usr/bin/env bash
# `make demo`: the main job end to end on the embedded defaults (no GPU, no Docker needed).
#
# Builds the public validation set and the demo exam, runs the scripted agent for one run on the
# demo-cpu-2 track (5 minutes of budget, graded on the demo exam), validates the result and builds
# the site from it. Everything goes under $DEMO_DIR (default .ari/demo, git-ignored): the
# committed results/ folder only ever holds real published runs, so the demo's result lands in
# $DEMO_DIR/results (the run copies its track's registry entry there) and the site is built from
# there. Each demo takes the next seed the folder has no run of, so that repeated demos build a
# real row of distinct seeds (3 make it non-provisional) instead of repeats of seed 0.
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO_DIR=${DEMO_DIR:-.ari/demo}
BIN=${BIN:-.venv/bin}
export ARI_HOME=${ARI_HOME:-$DEMO_DIR/home}
RESULTS=$DEMO_DIR/results
mkdir -p "$DEMO_DIR" "$RESULTS"
# Bold step titles on a terminal only: piped into a file, the output stays plain text.
if [ -t 1 ]; then
    step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
    step() { printf '\n== %s\n' "$*"; }
fi
started=$(date +%s)
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

seed=$("$BIN/python" - "$RESULTS/demo-cpu-2" <<'PY'
import json, sys
from pathlib import Path
used = set()
for path in Path(sys.argv[1]).glob("*.json"):
    try:
        used.add(json.loads(path.read_text())["seed"])
    except (OSError, ValueError, KeyError):
        pass
print(next(s for s in range(len(used) + 1) if s not in used))
PY
)
step "3/5 one run: scripted agent, local backend, track demo-cpu-2, seed $seed (about 5 minutes)"
status=0
# The scripted agent uses no model: its run is recorded as the row "scripted-baseline".
"$BIN/toolkit" run --agent scripted --backend local --track demo-cpu-2 --seed "$seed" \
    --exam "$DEMO_DIR/exam-$BUILDER/exam.jsonl" --results "$RESULTS" || status=$?
if [ "$status" -ne 0 ]; then
    echo "the run did not end valid or failed (status $status): see the result above" >&2
fi

step "4/5 validate every result file against the run model"
"$BIN/toolkit" runs validate "$RESULTS"
latest=$(ls -t "$RESULTS"/demo-cpu-2/*.json | head -n 1)
echo "latest result: $latest"

step "5/5 leaderboard site"
if [ -f mkdocs.yml ]; then
    ARI_RESULTS_DIR="$RESULTS" "$BIN/mkdocs" build --quiet --site-dir "$(pwd)/$DEMO_DIR/site"
    echo "site: $DEMO_DIR/site/index.html"
else
    echo "no mkdocs.yml yet: skipped"
fi

printf '\ndemo finished in %ss; result: %s\n' "$(( $(date +%s) - started ))" "$latest"
exit "$status"
