"""The aiperf operator: reconciles `AIPerfJob` and `AIPerfSweep` custom resources (kopf).

Today only its command line (`aiperf.operator.main`) exists; the reconciler comes next. The
CRDs it serves are generated from `aiperf.kube.crd_model` (`./pants run operator:crds`), and
it builds every object of a run with the same pure builders direct mode uses (`aiperf.kube`).
"""
