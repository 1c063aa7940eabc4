"""The provider relay: the controller's only way to the model provider, and the only evidence
that the provider failed.

Why: the scaffold's shell runs the model's commands as the scaffold's own user, so anything in
the controller (its environment, its files, the scaffold's output) is the model's to read and
to forge. So the key never enters the controller, and nothing the controller says decides that
a run failed for want of a provider (an `invalid` run is rerun: a free reroll if a model could
cause it).

Per run the harness starts one relay, a small HTTP server in its own process on a host
loopback port (for `--backend docker`, on the host's address on the network the egress
forwarder leaves by: `endpoint`). The scaffold's provider `baseURL` points at it with a
placeholder key; the controller's egress allow-list holds that one (address, port). For each
request the relay:

- takes only model calls (`provider_api.check_call`): POST to the provider's call endpoints
  under its base path, for the run's model, with no provider-side tools, and with the
  reasoning-effort fields the scaffold sent before any answer reached the controller (the
  model cannot have acted before that); anything else gets a 4xx from the relay itself;
- never forwards the bytes it got (`policy`): the body is parsed strictly (a duplicate
  key, NaN, text that is not UTF-8: refused) and written anew from an allow-list of fields
  per API, with one answer per call and the output capped (`RelayLimits.max_output_tokens`);
  the headers are built anew too, from the caller's only the few the allow-list names, and
  the real key (`Credential`);
- keeps the run's token and cost budget (`budget.Spend`): a call is passed on only
  while it is not spent; once it is, every call gets the relay's error in the provider's
  format and nothing more reaches the provider (the run's own doing: no provider failure);
- sends the call to the provider's base URL (HTTPS with the certificate checked, the
  system's CAs), and streams the answer back as it comes (an SSE stream is passed on chunk by
  chunk, never buffered), reading the provider's own usage counts on the way, and counts,
  logs and settles the call before the scaffold can have the whole answer (so a scaffold that
  reads it and exits leaves nothing uncounted);
- writes one line to `provider.jsonl` (time, method, path, status, bytes each way, time to
  the first byte, duration, upstream error, usage, what it dropped, pinned or capped; no
  body, no key), and to the harness's `agent.log` when the budget runs out, and the spend at
  the end.

The decision: a spell of calls that failed at the provider (unreachable, a broken answer, 5xx,
429 and the other `provider_api.FAILURE_STATUSES`), with no call answered in between, is a
suspicion when it lasts longer than `stall_limit_s`, or when the scaffold exits during one.
A suspicion is checked by a call of the harness's own (`provider_api.probe`) sent straight to
the provider; on a rate limit the relay first holds the controller's calls and waits as the
provider asks. Only when the probe fails too is the run `invalid` (`verdict`).
So a model that makes its own calls fail (odd requests, a spent rate limit, a killed scaffold)
gets no reroll: a provider that works answers the probe.

Not covered: the model's commands can send model calls of their own through the relay (same
model, same effort, no provider-side tools): they cannot be told apart from the scaffold's,
and they are counted in usage, logged and charged to the budget like them.


The parts, each an object of its own with a narrow interface, held and wired by the front:
`front` (the HTTP server and `ProviderRelay`: reads, checks and admits each call, and settles
it when it ends), `forward` (`Forwarder`: the way to the provider, and the only holder of the
key), `stream` (`StreamRelay`: the answer back), `verdict` (`Verdict`: spells, probes and the
decision), `accounting` (`Accounting`: counters, log, notes), `budget` (`Spend`: the spend
limit); beside them `policy` (what of a call is passed on), `retry` (sending again), `endpoint`
(where the relay listens, per backend).
"""
