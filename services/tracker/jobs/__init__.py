"""The job reconciler: the state machine (`machine`), what it decides from (`observer`, `decode`,
`claims`) and what carries its decisions out (`effects`, `endings`, `state`), with the triggers, locks and
clock that bring a job to be reconciled."""
