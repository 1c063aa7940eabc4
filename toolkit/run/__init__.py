"""One agent run under the benchmark's rules: workspace, clock, submissions, grading, result.

On disk, for run R on track T (`toolkit run --results RESULTS`):

    RESULTS/T/R.json              the published result (toolkit.results.model.RunResult), atomic
    RESULTS/T/R/audit.jsonl       every `runner` call: argv, times, exit code, output size+sha256
    RESULTS/T/R/history.jsonl     every submission, public score and promotion (hash-chained)
    RESULTS/T/R/candidates/       the packed bundles as submitted (cNNN.tar.gz); the graded one
                                  is re-checked against its recorded sha256 before grading
    RESULTS/T/R/transcript.txt    the agent's console (and, for model agents, its transcript)
                                  (at most 16 MiB per console file, then one note of
                                  what was dropped: `transcript`)
    RESULTS/T/R/agent.log         the harness's notes: isolation, start, stop, grading
    RESULTS/T/.R.reserve          the harness's reserve on the results volume while the agent
                                  works (`storage`); every file of RESULTS/T/R/ is hashed
                                  into R.json (`files`)
    $ARI_HOME/runs/R/workspace/   what the agent worked in (kept for inspection)
    $ARI_HOME/runs/R/harness/     RUNNING marker and launcher pids while the run lasts

Modules: `history` (candidates and promotions), `workspace` (assembly and leak check), `roles`
(controller and runner sandboxes), `submissions` (`runner submit/promote/history`), `recovery`
(runs whose harness died), `inputs` (exam, public set, training data), `artifacts` (the run
folder's files, their hashes and the heads of its chained logs), `storage` (the results
volume: the harness's reserve, and whose doing a full volume was), `verify` (re-grading a
published run), `transcript` (the agent's console, bounded), `spec` (what defines a run),
`agent_log` (the harness's notes), `live` (the step a run is in, and its picture for
`toolkit view`), and the run in progress as a sequence of parts, each taking what it needs
and returning what it made: `start` (its inputs; its premises: the reserve, the workspace,
the history), `sandboxes` (the runner and the controller), `supervise` (the agent's session),
`teardown` (its record), `final_grading` (the result to publish) and `outcome` (the
publication), called in order by `orchestrate` (`execute_run`). The deadline (`toolkit.clock`) and
the append-only hash-chained logs (`toolkit.results.chain`) live below both this package and
`toolkit.runner`.
"""
