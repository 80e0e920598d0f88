"""The aiperf operator: reconciles `AIPerfJob` custom resources (kopf).

`main` wires the process (flags, cluster configuration, `/healthz` and `/metrics`, kopf);
`handlers` maps kopf events onto `reconciler.JobReconciler`, whose methods work over an
injected kubernetes_asyncio `ApiClient`; `desired` (the objects a CR should own, built with the
same `aiperf.kube` builders direct mode uses), `ownership` (same-name recreation fencing) and
`status` (phases, conditions, fenced JSON Patches) are pure and tested without kopf. The CRDs
are generated from `aiperf.crd.model` (`./pants run operator:crds`).
"""
