"""The AIPerfJob and AIPerfSweep custom resources: `model` (the spec and status Structs, the
source of the CRDs), `generator` (the CRD YAML from the model: `./pants run operator:crds`) and
`validation` (the API server's structural schema and CEL rules, run locally).
"""
