"""The spec explored state by state: every reachable state of a small configuration, or a
sample of them, checked against the invariants, with the shortest run to a violation.

Theory of operation. A `model.Model` is a transition system: initial states, successors with
their action labels, and named invariants. `model.KafkaModel` is `spec` under one `Config`;
`tla_compat.TlaCompatModel` re-expresses a public TLA+ model of Kafka so the explorer can be
timed against TLC on the same state space. `explorer.explore` searches breadth first, level by
level, so the first violation found is a shortest one; `explorer.simulate` walks random paths
from a printed seed. The kafka model is searched through `flat`, an encoding of the same states
as flat tuples (the same counts and counterexamples, tested against the spec), which
`compiled` builds with Cython at install; `guided` orders the search by how close a state is
to a known bug's window (`spec.features`). `scenario` runs a transcript of named actions
against the spec (tests/testdata/*.txt), `fuzz` lets Hypothesis choose the actions, and
`report` and `spacetime` turn a result into JSON, ITF, JUnit, a table or a space-time view.
`progress` draws long searches and makes worker processes die with their parent.

Imports `spec` and `vocab` only: nothing here knows the reference broker or Z3. A partial-order
reduction (model_check.prove.por) is handed to `explore` by its caller.
"""
