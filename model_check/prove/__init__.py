"""The spec as formulas: Z3 checks of every run up to a depth (BMC) and of every state at once
(k-induction), for unbounded offsets, epochs and values.

Theory of operation. `symbolic` builds a symbolic state of the core model (one partition,
its replicas' logs as Z3 arrays with a length) and, per action instance (an action with its
broker ids fixed), the guard and the effect in the shape of the spec's handler; a differential
test holds each builder to `spec.actions` on random states. `engine` asks Z3 the questions:
bounded model checking unrolls the transition relation to a depth and looks for a violation;
induction asks, for each invariant and each action instance, whether a state where the
strengthened invariant holds can step to one where it fails, and a counterexample to
induction (CTI) is classified (reachable by a short search from the initial state, or
unreachable and asking for a lemma). `lemmas` holds the strengthening lemmas, each mirrored by
a predicate in `spec.lemmas` checked on reachable states by the explorer; `houdini` infers
which candidate lemmas are inductive together. `por` reads the independence of action
instances off the builders and gives the explorer a partial-order reduction.

Imports `spec`, `vocab` and `model_check.explore` (its short searches classify CTIs), never
`impl`: a proof is about the model, and conformance says how far the broker follows it.
"""
