"""The issuing engine: turns a load plan into credits for a pool of workers and accounts for
every one of them.

`engine.TimingManager` runs phases (`strategies`: closed loop, paced arrivals, fixed schedule)
through a `issuer.CreditIssuer` that picks workers (`workers.WorkerPool`) and keeps the books
(`ledger.PhaseLedger`), behind the ports of `ports`. The timing-manager service runs it for a
whole run; in a sharded run (`slices`) each worker-group-manager runs it for its own pod's
slice of the plan and the timing-manager only coordinates the pods.
"""
