"""Exhaustive breadth-first exploration of a `Model`, with shortest counterexamples.

Theory of operation. The search runs level by level. Level d holds the states first reached in
d steps. Expanding a level means, for each of its states: compute its successors, canonicalise
each (symmetry), and fingerprint it (64-bit `hash`). The next level is every fingerprint not yet
visited; each of its states has every invariant checked when first found, while its memory is
fresh (and a model may clear it from what the step changed). Because levels are sets, the
visited set and every count are the same whatever order states are expanded in, so:

- `workers > 1` gives exactly the counts and verdict of `workers = 1`. Workers are forked
  processes that own the states they generated: fingerprints and action labels cross process
  boundaries, and states only when a level is rebalanced (each new state at most once). A
  state two workers find is built and checked by the one that claims it first in a shared
  table (`_Claims`); the other only reports how it reached it. The coordinator keeps the
  visited set and, for each new state, the smallest (parent fingerprint, successor index)
  that reached it, so the parent tree, and hence every reported trace, is also independent
  of the number of workers. Each level is split between the workers in proportion to how
  fast each expanded the last one.
- A violation in level d is reported once the whole level is known and checked, before any of
  it is expanded, choosing the smallest (invariant order, fingerprint): counts stop at level d,
  and the counterexample has the shortest possible length, d steps.

Traces are rebuilt from parent pointers by replaying labels from the initial state.

Fingerprints: distinct states are told apart by a 64-bit hash, so two different states could
collide and one would go unexplored. The chance is about n^2 / 2^65 for n distinct states
(birthday bound, assuming a uniform hash); it is reported with every result.
"""

from __future__ import annotations

import heapq
import mmap
import multiprocessing
import os
import random
import time
from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain, compress
from operator import itemgetter
from typing import Any

import numpy as np

from model_check.explore.gcpause import gc_paused
from model_check.explore.model import Model
from model_check.explore.progress import die_with_parent


@dataclass
class Violation:
    invariant: str
    detail: str
    trace: list[tuple[Any, Any]]  # (label or None for the initial state, state)


@dataclass
class Result:
    """The outcome of a search. `result` is "ok", "violation" or "incomplete"."""

    result: str
    distinct_states: int
    generated_states: int
    depth: int
    seconds: float
    coverage: Counter = field(default_factory=Counter)
    violation: Violation | None = None
    collision_probability: float = 0.0
    symmetry: bool = False
    workers: int = 1
    reduction: bool = False  # partial-order reduction (model_check.prove.por)
    seed: int | None = None
    traces: int = 0
    stored_bytes: int = 0  # the visited set and the parent tree (an exhaustive search's)
    encoding: str = "spec"  # the states searched: the spec's dataclasses, or "flat"
    compiled: bool = False  # the flat encoding run compiled (model_check.explore.compiled)

    @property
    def states_per_second(self) -> float:
        return self.distinct_states / self.seconds if self.seconds > 0 else 0.0


_first = itemgetter(0)


def _clears(model: Model):
    """The first test of a new state, given the state it was reached from, in which every
    invariant holds (it was checked, and its level had no violation): True when every
    invariant holds in the new one too. A model may answer from what the step changed
    (`holds_from`), or at once (`holds`, one call where the checks are many); only a state
    not cleared is asked invariant by invariant."""
    holds_from = getattr(model, "holds_from", None)
    if holds_from is not None:
        return holds_from
    holds = getattr(model, "holds", None)
    if holds is not None:
        return lambda source, state: holds(state)
    return lambda source, state: False


def _count_kinds(kinds: Counter, labels: list) -> None:
    """Add the action names of `labels` to `kinds`: counted by type first (a C-level count),
    named once per type."""
    for kind, count in Counter(map(type, labels)).items():
        if kind is tuple:
            kinds.update(label[0] for label in labels if type(label) is tuple)
        else:
            kinds[kind.__name__] += count


def collision_probability(n: int) -> float:
    """Probability that some two of n distinct states share a 64-bit fingerprint."""
    return min(1.0, n * (n - 1) / 2 / 2.0**64)


# ------------------------------------------------------------------------------------------
# Storage. A stored state costs its fingerprint in a sorted array (8 bytes) and, at the
# coordinator, its parent's position and its successor index (4 + 2 bytes): no Python object
# per state, so millions of states cost tens of megabytes and nothing for the collector.


def _find(table: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of `keys`, its index in the sorted, non-empty `table` (0 where it is absent)
    and whether it is there. The keys are searched in ascending order, so each search starts
    near the last one's answer: half the time of searching in the given order, sort included."""
    order = np.argsort(keys)
    ascending = keys[order]
    at = np.searchsorted(table, ascending)
    at[at == len(table)] = 0
    where = np.empty(len(keys), dtype=np.int64)
    where[order] = at
    found = np.empty(len(keys), dtype=bool)
    found[order] = table[at] == ascending
    return where, found


class _Visited:
    """A set of 64-bit fingerprints as one sorted int64 array: membership is asked in batches
    (binary search per item, in C) and whole levels are merged in at once."""

    def __init__(self) -> None:
        self.fps = np.empty(0, dtype=np.int64)

    def contains(self, fps: np.ndarray) -> np.ndarray:
        """A bool per item of `fps`: whether it is in the set."""
        if not len(self.fps):
            return np.zeros(len(fps), dtype=bool)
        return _find(self.fps, fps)[1]

    def add(self, fps) -> None:
        """Add fingerprints that are distinct and none of them in the set yet."""
        new = np.fromiter(fps, dtype=np.int64)
        if len(new):
            new.sort()
            self.fps = np.insert(self.fps, np.searchsorted(self.fps, new), new)


class _Tree:
    """The coordinator's record of the search: the visited fingerprints, and for each state, by
    position (initial states first, then level by level in fingerprint order), the position
    of its parent (-1 for an initial state) and which successor of the parent it is (for an
    initial state: which initial state). `visited`, when given, is kept up to date by its
    owner (the single in-process worker)."""

    def __init__(self, visited: _Visited | None = None) -> None:
        self.owns_visited = visited is None
        self.visited = _Visited() if visited is None else visited
        self.parent: list[np.ndarray] = []
        self.index: list[np.ndarray] = []
        self.count = 0

    def add_level(self, fps, parent_pos, index) -> int:
        """Store a level; return the position of its first state."""
        start = self.count
        if self.owns_visited:
            self.visited.add(fps)
        self.parent.append(np.asarray(parent_pos, dtype=np.int32))
        self.index.append(np.asarray(index, dtype=np.uint16))
        self.count += len(fps)
        return start

    def chain(self, position: int) -> tuple[int, list[int]]:
        """(initial state index, successor indices from it) of the state at `position`."""
        parent = np.concatenate(self.parent)
        index = np.concatenate(self.index)
        steps = []
        while parent[position] >= 0:
            steps.append(int(index[position]))
            position = int(parent[position])
        return int(index[position]), steps[::-1]

    def nbytes(self) -> int:
        return self.visited.fps.nbytes + sum(a.nbytes for a in self.parent + self.index)


# Successors are checked against the visited array in batches of this many.
_BATCH = 4096
# `explore(workers="auto")`: this many workers once a level to expand holds AUTO_LEVEL states
# (below that, forking and messages cost more than a second core gives).
AUTO_WORKERS = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                   else os.cpu_count() or 1, 4)  # the cores this process may run on
AUTO_LEVEL = 2_000


class _Claims:
    """Which worker holds a new state, shared by forked workers as a hash table in shared
    memory: (fingerprint, level) per slot, linear probing. A worker claims its batch of new
    states before building and checking them; one already claimed (by another worker in this
    level, or in an earlier level) is only reported, with its parent and index for the
    coordinator's smallest, not held. Without it, each worker builds and checks every state
    it finds, and a quarter of B1's three-broker states were found by both workers in one
    level.

    The table is only a shortcut: the coordinator still drops visited states and dedups what
    workers report. Workers write without locks, so two may claim one state (both then hold
    it, as without the table) or overwrite each other's claim (a later finder then holds it
    too); neither changes a count or a trace. A fingerprint found in the table was written by
    the worker that claimed it, which holds it, or in an earlier level, when it is visited:
    either way its reporter may leave it. Nothing is dropped on the table's word alone, so
    nothing depends on the order in which another processor sees the two arrays' writes. The
    level only lets a slot be reused two levels later, so the table never fills; two levels of
    more than about a million states between them find fewer free slots, and more of their
    states are built twice, as without the table (24 MB, made only for several workers)."""

    PROBES = 8
    NEW, CLAIMED = 0, 1

    def __init__(self, bits: int = 21) -> None:
        size = 1 << bits
        self.mask = size - 1
        self._memory = mmap.mmap(-1, size * 12)  # anonymous and shared with forked children
        self.fps = np.frombuffer(self._memory, dtype=np.int64, count=size)
        self.levels = np.frombuffer(self._memory, dtype=np.int32, count=size, offset=size * 8)

    def claim(self, fps: np.ndarray, level: int) -> np.ndarray:
        """Claim the distinct `fps` for this worker in `level` (>= 1); per item, NEW (claimed,
        or no free slot within PROBES: held, as without the table) or CLAIMED (already)."""
        status = np.zeros(len(fps), dtype=np.int8)
        at = (fps ^ (fps >> 29)) & self.mask
        todo = np.arange(len(fps))
        for _ in range(self.PROBES):
            if not len(todo):
                break
            slots = at[todo]
            found = self.fps[slots]
            levels = self.levels[slots]
            hit = (found == fps[todo]) & (levels > 0)
            status[todo[hit]] = self.CLAIMED
            free = ~hit & (levels < max(level - 1, 1))  # empty (0), or two levels old
            # One claim per slot: the first of the batch's candidates for it.
            taken, first = np.unique(slots[free], return_index=True)
            winners = todo[free][first]
            self.levels[taken] = level
            self.fps[taken] = fps[winners]
            left = np.ones(len(todo), dtype=bool)
            left[hit] = False
            left[np.flatnonzero(free)[first]] = False
            todo = todo[left]
            at[todo] = (at[todo] + 1) & self.mask
        return status


# ------------------------------------------------------------------------------------------
# The expansion work, shared by the in-process and the forked workers.


class _Expander:
    """Holds the states this worker generated and expands the ones the coordinator accepts.

    States travel with their position in the coordinator's tree (`_Tree`): positions follow
    fingerprint order within a level, so ordering by position is ordering by fingerprint."""

    def __init__(self, model: Model, symmetry: bool, check: bool, reduction=None):
        self.model = model
        self.symmetry = symmetry
        self.check = check
        # Partial-order reduction (model_check.prove.por): per state of the next level, the
        # instances every step into it rules out, as a bit mask.
        self.reduction = reduction
        self.ruled_out: dict[int, int] = {}
        # A forked worker hands its new states' masks to the coordinator, which ANDs those of
        # a state several workers found; the in-process expander keeps its own.
        self.reports_masks = False
        self.pending: dict[int, Any] = {}
        # Every fingerprint this worker reported in an earlier level is visited by now (it was
        # either new and accepted, or already visited), so it can be skipped at once.
        self.seen = _Visited()
        self.previous: set[int] = set()  # the fingerprints of the last level expanded here
        self.checks = list(model.invariants.items())
        self.clears = _clears(model) if check else None
        # A model may rebuild a new state of parts shared with earlier ones (less memory,
        # and what is shared stays in the processor's caches).
        self.compact = getattr(model, "compact", None)
        # With several workers: the shared claims (`_Claims`), the level being expanded, and
        # the new states claimed already (reported, not held).
        self.claims: _Claims | None = None
        self.level = 0
        self.foreign: dict[int, None] = {}
        # The violations among the states found since the last report, as (invariant order,
        # fingerprint, name, detail).
        self.found: list[tuple[int, int, str, str]] = []

    def fingerprint(self, state: Any) -> tuple[int, Any]:
        if self.symmetry:
            state = self.model.canonical(state)
        return hash(state), state

    def seed(self, states: list[Any]) -> tuple[list[tuple[int, int]], list]:
        """(fingerprint, index) of each distinct initial state, and their violations
        (`_violation`)."""
        out = []
        for index, state in enumerate(states):
            fp, canon = self.fingerprint(state)
            if fp not in self.pending:
                if self.compact is not None:
                    canon = self.compact(None, canon)
                self.pending[fp] = canon
                out.append((fp, index))
                if self.check:
                    self._violation(fp, canon)
        self.seen.add(self.pending)
        found, self.found = self.found, []
        return out, found

    def _violation(self, fp: int, state) -> None:
        """Record the state's violation, if any: the first invariant it breaks."""
        for order, (name, check) in enumerate(self.checks):
            detail = check(state)
            if detail is not None:
                self.found.append((order, fp, name, detail))
                return

    def export(self, fps: list[int]) -> list[Any]:
        """Hand some accepted states to the coordinator, to balance the next level."""
        return [self.pending.pop(fp) for fp in fps]

    def expand(self, accepted: tuple[np.ndarray, np.ndarray],
               imported: list[tuple[int, int, Any]], expand: bool,
               ruled_out: dict[int, int] | None = None):
        """Expand the accepted states, given as (positions, fingerprints), both ascending, and
        the imported ones, (position, fingerprint, state). Return the new states' violations
        (`_violation`), the new states as (fingerprints, parent positions, successor indices),
        the action counts, the number of successors, and under the reduction each new state's
        mask (uint64, in the new states' order; else None). `ruled_out`: with several
        workers, the coordinator's masks of the states given."""
        if ruled_out is not None:
            self.ruled_out = ruled_out
        held, self.pending = self.pending, {}
        positions, fps = accepted
        for _, fp, state in imported:
            held[fp] = state
        reduced = expand and self.reduction is not None
        if reduced:
            level = set(fps.tolist())
            level.update(fp for _, fp, _ in imported)
        elif imported:
            # Visited now, though another worker reported them: a successor landing on one
            # is then dropped here, not sent to the coordinator.
            got = np.fromiter((fp for _, fp, _ in imported), np.int64, len(imported))
            self.seen.add(got[~self.seen.contains(got)].tolist())

        def frontier():
            # The reduced search's order: by position (so by fingerprint), as it records a
            # state's first discovery, then its smallest; built a chunk at a time, as a level
            # of (position, fingerprint) pairs would cost more than the states' own records.
            own = chain.from_iterable(
                zip(positions[lo:lo + _BATCH].tolist(), fps[lo:lo + _BATCH].tolist(),
                    strict=True) for lo in range(0, len(fps), _BATCH))
            if not imported:  # one worker, or nothing handed over: no merge to pay for
                return own
            return heapq.merge(own, ((pos, fp) for pos, fp, _ in imported), key=_first)

        parents = array("q")
        indices = array("H")
        kinds: Counter = Counter()
        generated = 0
        if expand:
            self.level += 1
            if reduced:
                generated = self._expand_reduced(frontier(), held, level, parents, indices,
                                                 kinds)
                self.previous = level
            else:
                generated = self._expand(held, _positions(held, accepted, imported), parents,
                                         indices, kinds)
        pending = self.pending
        masks = None
        if self.reports_masks:
            masks = np.fromiter((self.ruled_out.get(fp, 0) for fp in pending), np.uint64,
                                len(pending))
        found, self.found = self.found, []
        reported = list(pending)
        held = len(reported)
        if self.foreign:
            reported.extend(self.foreign)
            self.foreign = {}
        return found, (reported, parents, indices, held), kinds, generated, masks

    def _expand(self, held: dict[int, Any], positions: np.ndarray, parents: array,
                indices: array, kinds: Counter) -> int:
        """Expand the level's states (`held`, fingerprint -> state; `positions`, each one's
        position in `held`'s order, -1 for one not to expand) into `pending`, and record each
        new state's parent position and successor index in `parents` and `indices`; return
        the number of successors.

        States are expanded in the order they were found, not by position: siblings share
        their parts (`compact`), so one state's expansion finds the next one's memory in the
        processor's caches (by position, the whole default 3/2/2 graph took 1.13-1.21x as
        long). The parent recorded is still the smallest (position, index) that reaches a
        state: kept in `best` for the level's new states and in `waiting` for the candidates
        in the batch, so a repeat of either is not batched again."""
        canonical = self.model.canonical if self.symmetry else None
        successors = self.model.successors
        labels: list = []
        kind_of = labels.append
        # fingerprint -> smallest (parent position << 16 | successor index) reaching it
        best: dict[int, int] = {}
        waiting: dict[int, int] = {}
        batch: list[tuple[int, Any, Any]] = []
        fresh = batch.append
        generated = 0
        order = list(held)
        for lo in range(0, len(order), _BATCH):
            for fp, at in zip(order[lo:lo + _BATCH], positions[lo:lo + _BATCH].tolist(),
                              strict=True):
                state = held.pop(fp)
                if at < 0:  # not this worker's to expand (another found it first), or cut
                    continue
                base = at << 16
                index = 0
                for label, nxt in successors(state):
                    kind_of(label)
                    if canonical is not None:
                        nxt = canonical(nxt)
                    fp = hash(nxt)
                    known = best if fp in best else waiting if fp in waiting else None
                    if known is None:  # first found in this level: is it visited already?
                        waiting[fp] = base + index
                        fresh((fp, nxt, state))
                    elif base < (was := known[fp]):  # a smaller parent position, or the same
                        key = base + index
                        if key < was:
                            known[fp] = key
                    index += 1
                if index > 0x10000:  # an index shares a key with the position; a uint16
                    raise OverflowError(f"a state with {index} successors (at most 65,536)")
                generated += index
                if len(batch) >= _BATCH:
                    self._admit(batch, waiting, best)
                if len(labels) > 4096:
                    _count_kinds(kinds, labels)
                    labels.clear()
        self._admit(batch, waiting, best)
        _count_kinds(kinds, labels)
        pending, foreign = self.pending, self.foreign
        keys = [best[fp] for fp in chain(pending, foreign)]
        parents.extend([key >> 16 for key in keys])
        indices.extend([key & 0xFFFF for key in keys])
        self.seen.add(chain(pending, foreign))
        return generated

    def _unvisited(self, batch: list) -> tuple[np.ndarray, np.ndarray]:
        """The fingerprints of a batch's items (fingerprint first), and per item whether no
        earlier level visited it."""
        fps = np.fromiter(map(_first, batch), np.int64, len(batch))
        return fps, ~self.seen.contains(fps)

    def _admit(self, batch: list, waiting: dict[int, int], best: dict[int, int]) -> None:
        """Take the batch's (fingerprint, state, parent state) candidates, each found for the
        first time in this level, that no earlier level visited into `pending` (and their
        keys from `waiting` into `best`), and check each."""
        pending = self.pending
        clears = self.clears
        compact = self.compact
        fps, fresh = self._unvisited(batch)
        if self.claims is not None and fresh.any():
            at = np.flatnonzero(fresh)
            claimed = at[self.claims.claim(fps[at], self.level) == _Claims.CLAIMED]
            fresh[claimed] = False
            for fp in fps[claimed].tolist():  # reported, not held
                self.foreign[fp] = None
                best[fp] = waiting[fp]
        for fp, nxt, source in compress(batch, fresh.tolist()):
            if compact is not None:
                nxt = compact(source, nxt)
            pending[fp] = nxt
            best[fp] = waiting[fp]
            if clears is not None and not clears(source, nxt):
                self._violation(fp, nxt)
        batch.clear()
        waiting.clear()

    def _accept(self, batch: list, parents: array, indices: array,
                masks: dict[int, int] | None = None) -> None:
        """Take the batch's (fingerprint, parent position, index, state, mask, parent state)
        successors that no earlier level visited into `pending`, recording parent and index of
        the first, and check each; with `masks` (the reduction), AND each step's mask into its
        state's. In ascending position order the first discovery of a state within this
        worker is its smallest (parent, index); batches keep that order."""
        pending = self.pending
        clears = self.clears
        compact = self.compact
        for fp, parent, index, nxt, mask, source in compress(batch,
                                                             self._unvisited(batch)[1].tolist()):
            if fp not in pending:
                if compact is not None:
                    nxt = compact(source, nxt)
                pending[fp] = nxt
                parents.append(parent)
                indices.append(index)
                if clears is not None and not clears(source, nxt):
                    self._violation(fp, nxt)
                if masks is not None:
                    masks[fp] = mask
            elif masks is not None:
                masks[fp] &= mask
        batch.clear()

    def _expand_reduced(self, frontier, held, level, parents, indices, kinds) -> int:
        """`expand`'s successor loop under partial-order reduction (no symmetry):
        each state skips the steps every step into it ruled out, and a new state's mask is
        the intersection over the steps from this level that reach it. Successor indices are
        candidate positions (`Reduction.successor_at` rebuilds a trace from them)."""
        reduction = self.reduction
        after = reduction.after
        previous, pending = self.previous, self.pending
        ruled_out, self.ruled_out = self.ruled_out, {}
        masks = self.ruled_out
        successors = reduction.successors
        labels: list = []
        batch: list[tuple[int, int, int, Any, int, Any]] = []
        generated = 0
        for pos, fp in frontier:
            state = held.pop(fp)
            before = ruled_out.pop(fp, 0)
            for label, k, index, nxt in successors(state, before):
                labels.append(label)
                generated += 1
                nfp = hash(nxt)
                if nfp in level or nfp in previous:
                    continue
                mask = after(before, k)
                if nfp in pending:
                    masks[nfp] &= mask
                else:
                    batch.append((nfp, pos, index, nxt, mask, state))
            if len(batch) >= _BATCH:
                self._accept(batch, parents, indices, masks)
            if len(labels) > 4096:
                _count_kinds(kinds, labels)
                labels.clear()
        self._accept(batch, parents, indices, masks)
        _count_kinds(kinds, labels)
        self.seen.add(pending)
        return generated


def _worker_main(conn, model, symmetry, check, parent, reduction=None, claims=None,
                 expander=None):
    """A forked worker's loop; `expander`: the in-process one it was forked from mid-search
    (`_Pool.fork`), whose states and visited record it inherits."""
    die_with_parent(parent)
    if expander is None:
        expander = _Expander(model, symmetry, check, reduction)
    expander.claims = claims
    expander.reports_masks = reduction is not None
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        kind = message[0]
        if kind == "stop":
            return
        if kind == "seed":
            conn.send(expander.seed(message[1]))
        elif kind == "export":
            conn.send(expander.export(message[1]))
        elif kind == "expand":
            started = time.perf_counter()
            reply = expander.expand(message[1], message[2], message[3], message[4])
            conn.send((reply, time.perf_counter() - started))


class _Pool:
    """Forked workers speaking a tiny protocol over pipes; or one in-process expander."""

    def __init__(self, model: Model, workers: int, symmetry: bool, check: bool,
                 reduction=None, expander: _Expander | None = None):
        self.workers = workers
        if workers == 1:
            self.local = _Expander(model, symmetry, check, reduction)
            return
        # Each worker's states expanded per second in the last level: the next level is split
        # in proportion, as the same number of states does not take the same time everywhere
        # (a worker expanding states handed over to it is the slower, by a tenth).
        self.rates = [1.0] * workers
        claims = None if reduction is not None else _Claims()
        ctx = multiprocessing.get_context("fork")  # shares the hash secret: same fingerprints
        self.conns = []
        self.procs = []
        for _ in range(workers):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker_main,
                               args=(child, model, symmetry, check, os.getpid(), reduction,
                                     claims, expander),
                               daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)

    def fork(self, workers: int, model: Model, symmetry: bool, check: bool) -> _Pool:
        """A pool of `workers` forked from this one-process pool between levels: each holds a
        copy of every state of the level to expand and of what was visited, so nothing is
        sent; `_groups` then gives each its share of the level."""
        pool = _Pool(model, workers, symmetry, check, expander=self.local)
        self.local.pending = {}  # the workers have their copies
        return pool

    def seed(self, states: list[Any]) -> tuple[list[tuple[int, int]], list]:
        if self.workers == 1:
            return self.local.seed(states)
        self.conns[0].send(("seed", states))
        return self.conns[0].recv()

    def expand(self, groups: list[tuple[np.ndarray, np.ndarray]], expand: bool,
               masks: dict[int, int] | None = None):
        """Expand the next level, `groups[w]` being the states worker w found, as (position,
        fingerprint); `masks`: under the reduction with several workers, every state's mask
        (each worker gets those of the states it expands).

        Workers that found more than their share first hand the excess over (only new states
        ever travel, once), so the level is split evenly whoever discovered it.
        """
        if self.workers == 1:
            return [self.local.expand(groups[0], [], expand)]
        shares = _shares(sum(len(g[1]) for g in groups), self.rates)
        keep = [(pos[:share], fps[:share])
                for (pos, fps), share in zip(groups, shares, strict=True)]
        excess = {w: (pos[share:].tolist(), fps[share:].tolist())
                  for w, ((pos, fps), share) in enumerate(zip(groups, shares, strict=True))
                  if len(fps) > share}
        for w, (_, fps) in excess.items():
            self.conns[w].send(("export", fps))
        moved = [(pos, fp, state) for w, (positions, fps) in excess.items()
                 for pos, fp, state in zip(positions, fps, self.conns[w].recv(), strict=True)]
        imports: list[list[tuple[int, int, Any]]] = [[] for _ in range(self.workers)]
        for w in range(self.workers):
            room = shares[w] - len(keep[w][1])
            imports[w], moved = moved[:room], moved[room:]
        for conn, own, extra in zip(self.conns, keep, imports, strict=True):
            given = None if masks is None else {
                fp: masks[fp] for fp in [*own[1].tolist(), *(fp for _, fp, _ in extra)]
                if fp in masks}
            conn.send(("expand", own, extra, expand, given))
        replies = []
        for w, conn in enumerate(self.conns):
            reply, seconds = conn.recv()
            expanded = len(keep[w][1]) + len(imports[w])
            if expand and expanded >= 64 and seconds > 0:
                self.rates[w] = expanded / seconds
            replies.append(reply)
        return replies

    def close(self) -> None:
        if self.workers == 1:
            return
        for conn in self.conns:
            try:
                conn.send(("stop",))
            except OSError:
                pass
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()


# ------------------------------------------------------------------------------------------


def _positions(held: dict[int, Any], accepted: tuple[np.ndarray, np.ndarray],
               imported: list[tuple[int, int, Any]]) -> np.ndarray:
    """The position of each of `held`'s states, in its order: from the accepted (positions,
    fingerprints), fingerprints ascending, and the imported (position, fingerprint, state);
    -1 for a state neither names."""
    positions, fps = accepted
    if imported:
        fps = np.concatenate([fps, np.fromiter((fp for _, fp, _ in imported), np.int64,
                                               len(imported))])
        positions = np.concatenate([positions, np.fromiter(
            (pos for pos, _, _ in imported), np.int64, len(imported))])
        order = np.argsort(fps)
        fps, positions = fps[order], positions[order]
    if not len(fps):
        return np.full(len(held), -1, dtype=np.int64)
    at, found = _find(fps, np.fromiter(held, np.int64, len(held)))
    return np.where(found, positions[at], -1)


def _shares(total: int, rates: list[float]) -> list[int]:
    """`total` states split in proportion to `rates`, the shares summing to `total`; no rate
    counts for less than a quarter of the fastest, so one slow level (the machine busy for a
    moment) cannot leave a worker nearly idle for the rest of the search."""
    floor = max(rates) / 4
    rates = [max(rate, floor) for rate in rates]
    whole = sum(rates)
    shares = [int(total * rate / whole) for rate in rates]
    for w in range(total - sum(shares)):
        shares[w % len(shares)] += 1
    return shares


def _groups(workers: int, start: int, fps: np.ndarray, owner: np.ndarray | None) -> list:
    """Per worker, the (positions, fingerprints) of the level's states it holds; with `owner`
    None (every worker holds every state), a slice each."""
    positions = np.arange(start, start + len(fps), dtype=np.int64)
    if workers == 1:
        return [(positions, fps)]
    if owner is None:
        owner = np.arange(len(fps)) % workers
    return [(positions[owner == w], fps[owner == w]) for w in range(workers)]


def _located(found: list, start: int, fps: np.ndarray) -> list:
    """The violations `found` (invariant order, fingerprint, name, detail) in the level that
    starts at position `start` and holds `fps`, as (invariant order, position, name,
    detail). A state with a violation ends the search, so this is asked in earnest once."""
    if not found:
        return []
    position = {fp: start + i for i, fp in enumerate(fps.tolist())}
    return [(order, position[fp], name, detail) for order, fp, name, detail in found
            if fp in position]


def _merge_level(tree: _Tree, replies, masks: dict | None = None) -> tuple[np.ndarray, ...]:
    """The next level from the workers' replies, in fingerprint order: (fingerprints, parent
    positions, successor indices, owning worker). A state two workers found goes to the one
    with the smaller (parent position, index), so the tree does not depend on the number of
    workers; states already visited (another worker's, or older) are dropped. Under the
    reduction with several workers, `masks` is filled with the new states' masks."""
    fps = np.concatenate([np.array(r[1][0], dtype=np.int64) for r in replies])
    parent = np.concatenate([np.frombuffer(r[1][1], dtype=np.int64) for r in replies])
    index = np.concatenate([np.frombuffer(r[1][2], dtype=np.uint16) for r in replies])
    owner = np.concatenate([np.full(len(r[1][0]), w, dtype=np.int32)
                            for w, r in enumerate(replies)])
    if len(replies) > 1 and len(fps):
        held = np.concatenate([np.arange(len(r[1][0])) < r[1][3] for r in replies])
        fresh = ~tree.visited.contains(fps)
        fps, parent, index, owner, held = (fps[fresh], parent[fresh], index[fresh],
                                           owner[fresh], held[fresh])
        # Sorted by (fingerprint, parent, index), the first of each fingerprint is the smallest.
        order = np.lexsort((index, parent, fps))
        fps, parent, index, owner, held = (fps[order], parent[order], index[order],
                                           owner[order], held[order])
        first = np.ones(len(fps), dtype=bool)
        first[1:] = fps[1:] != fps[:-1]
        # The state goes to a worker holding it (`_Claims`): the first holder in that order.
        group = np.cumsum(first) - 1
        holders = np.flatnonzero(held)
        groups, at = np.unique(group[holders], return_index=True)
        if len(groups) != int(first.sum()):
            raise AssertionError("a new state reported by workers none of which holds it")
        chosen = owner[holders[at]]  # one holder per state, in the states' order
        if masks is not None:
            # Each new state's mask: the AND of every worker's mask for it.
            found = np.concatenate([r[4] for r in replies])[fresh][order]
            masks.update(zip(fps[first].tolist(),
                             np.bitwise_and.reduceat(found, np.flatnonzero(first)).tolist(),
                             strict=True))
        return fps[first], parent[first], index[first], chosen
    order = np.argsort(fps, kind="stable")
    return fps[order], parent[order], index[order], owner[order]


@gc_paused
def explore(
    model: Model,
    *,
    max_states: int | None = None,
    max_depth: int | None = None,
    workers: int | str = 1,
    symmetry: bool | None = None,
    check_invariants: bool = True,
    progress: Callable[[dict[str, Any]], None] | None = None,
    reduction=None,
) -> Result:
    """Breadth-first search of every reachable state; see the module docstring. `reduction`:
    a partial-order reduction of the model's config (model_check.prove.por.Reduction, made by
    the caller): the same states, fewer transitions computed; with several workers the
    coordinator intersects the masks of a state more than one found. Raises ValueError when
    the model does not allow it. `workers="auto"`:
    one process until a level to expand holds AUTO_LEVEL states, then AUTO_WORKERS forked
    from it (one process throughout under the reduction)."""
    started = time.perf_counter()
    use_symmetry = model.symmetric() if symmetry is None else (symmetry and model.symmetric())
    check = check_invariants and bool(model.invariants)
    auto = workers == "auto"
    if auto:
        workers = 1
        auto = AUTO_WORKERS > 1 and reduction is None
    workers = max(1, workers)
    if reduction is not None:
        if use_symmetry:
            raise ValueError("partial-order reduction runs without symmetry")
        if not getattr(model, "reducible", False):
            raise ValueError(f"partial-order reduction: the {model.name} model has none")
        if getattr(model, "config", None) != reduction.config:
            raise ValueError("partial-order reduction: made for another config than the model's")
        if workers > 1 and reduction.size > 64:
            raise ValueError("partial-order reduction with several workers: at most 64 action "
                             f"instances (this config has {reduction.size}); use one worker")
    # With several workers under the reduction, the coordinator ANDs the masks of a state
    # that more than one worker found, and hands them to the worker that expands it.
    level_masks: dict[int, int] | None = {} if reduction is not None and workers > 1 else None
    pool = _Pool(model, workers, use_symmetry, check, reduction)
    # With one worker its own record of what it reported is exactly the visited set: shared.
    tree = _Tree(pool.local.seen if workers == 1 else None)
    coverage: Counter = Counter()
    generated = 0
    depth = 0
    result = "ok"
    violation = None
    try:
        init_states = list(model.init_states())
        seeded, found = pool.seed(init_states)
        start = tree.add_level([fp for fp, _ in seeded], [-1] * len(seeded),
                               [index for _, index in seeded])
        fps = np.array([fp for fp, _ in seeded], dtype=np.int64)
        groups = _groups(workers, start, fps, np.zeros(len(fps), dtype=np.int32))
        while len(fps):
            located = _located(found, start, fps)
            if located:
                _, pos, name, detail = min(located)
                trace = _rebuild(model, use_symmetry, tree, init_states, pos, reduction)
                violation = Violation(name, detail, trace)
                result = "violation"
                break
            last_level = max_depth is not None and depth >= max_depth
            if auto and len(fps) >= AUTO_LEVEL and not last_level:
                pool = pool.fork(AUTO_WORKERS, model, use_symmetry, check)
                workers, auto = AUTO_WORKERS, False
                tree.owns_visited = True  # the in-process expander no longer adds to it
                groups = _groups(workers, start, fps, None)
            replies = pool.expand(groups, expand=not last_level, masks=level_masks)
            found = [v for reply in replies for v in reply[0]]
            for reply in replies:
                coverage.update(reply[2])
                generated += reply[3]
            next_masks = None if level_masks is None else {}
            fps, parent_pos, index, owner = _merge_level(tree, replies, next_masks)
            level_masks = next_masks
            if max_states is not None and tree.count + len(fps) > max_states:
                room = max(0, max_states - tree.count)
                fps, parent_pos, index, owner = fps[:room], parent_pos[:room], index[:room], \
                    owner[:room]
                result = "incomplete"
            start = tree.add_level(fps, parent_pos, index)
            groups = _groups(workers, start, fps, owner)
            if len(fps):
                depth += 1
            if progress is not None:
                progress(dict(depth=depth, distinct=tree.count, generated=generated,
                              queue=len(fps), seconds=time.perf_counter() - started))
            if result == "incomplete":
                break
    finally:
        pool.close()
    return Result(
        result=result,
        distinct_states=tree.count,
        generated_states=generated,
        depth=depth,
        seconds=time.perf_counter() - started,
        coverage=coverage,
        violation=violation,
        collision_probability=collision_probability(tree.count),
        stored_bytes=tree.nbytes(),
        symmetry=use_symmetry,
        workers=workers,
        reduction=reduction is not None,
    )


def _rebuild(model, symmetry, tree: _Tree, init_states, position: int,
             reduction=None) -> list[tuple[Any, Any]]:
    """Replay the successor indices on the parent chain from the initial state."""
    init, chain = tree.chain(position)
    state = init_states[init]
    if symmetry:
        state = model.canonical(state)
    trace = [(None, state)]
    if reduction is not None:  # the indices are candidate positions
        for index in chain:
            label, state = reduction.successor_at(state, index)
            trace.append((label, state))
        return trace
    for index in chain:
        for i, (label, nxt) in enumerate(model.successors(state)):
            if i == index:
                state = model.canonical(nxt) if symmetry else nxt
                trace.append((label, state))
                break
        else:  # pragma: no cover - would mean successors() is not deterministic
            raise AssertionError("successor order changed between search and replay")
    return trace


SIM_BIASES = ("uniform", "rare")


def first_violation(invariants: list, state) -> tuple[str, str] | None:
    """(name, detail) of the first of `invariants` (name, check) that `state` breaks."""
    for name, inv in invariants:
        detail = inv(state)
        if detail is not None:
            return name, detail
    return None


@gc_paused
def simulate(
    model: Model,
    *,
    seed: int,
    depth: int,
    traces: int,
    check_invariants: bool = True,
    bias: str = "uniform",
) -> Result:
    """Random walks from the initial states; every successor is checked, not just the path.

    bias "uniform" picks each step among the enabled actions alike; "rare" weighs an action by
    1 / (1 + how often walks so far took an action of its kind), so walks spend their steps on
    the kinds that random choice starves (a crash, an expansion, a second election) rather
    than on the many fetch and read steps enabled in most states."""
    if bias not in SIM_BIASES:
        raise ValueError(f"bias: {bias!r} (known: {', '.join(SIM_BIASES)})")
    start = time.perf_counter()
    rng = random.Random(seed)
    coverage: Counter = Counter()
    chosen: Counter = Counter()
    generated = 0
    seen: set[int] = set()
    deepest = 0
    invariants = list(model.invariants.items()) if check_invariants else []

    def check(state):
        return first_violation(invariants, state)

    init_states = list(model.init_states())
    for _ in range(traces):
        state = rng.choice(init_states)
        trace = [(None, state)]
        found = check(state)
        if found:
            return _sim_result(start, "violation", seen, generated, 0, coverage, Violation(*found, trace), seed, traces)
        for step in range(depth):
            succs = list(model.successors(state))
            if not succs:
                break
            for label, nxt in succs:
                generated += 1
                coverage[model.action_name(label)] += 1
                seen.add(hash(nxt))
                found = check(nxt)
                if found:
                    trace.append((label, nxt))
                    return _sim_result(start, "violation", seen, generated, step + 1, coverage,
                                       Violation(*found, trace), seed, traces)
            if bias == "rare":
                names = [model.action_name(label) for label, _ in succs]
                i = rng.choices(range(len(succs)), [1 / (1 + chosen[n]) for n in names])[0]
                label, state = succs[i]
                chosen[names[i]] += 1
            else:
                label, state = rng.choice(succs)
            trace.append((label, state))
            deepest = max(deepest, step + 1)
    return _sim_result(start, "ok", seen, generated, deepest, coverage, None, seed, traces)


def _sim_result(start, result, seen, generated, depth, coverage, violation, seed, traces):
    return Result(result, len(seen), generated, depth, time.perf_counter() - start, coverage,
                  violation, collision_probability(len(seen)), seed=seed, traces=traces)


# The expansion loop as Python, whichever runs (tests compare the two).
PythonExpander = _Expander


def _use_compiled() -> None:
    """Expand with the compiled copy of `_Expander` where `model_check.explore.compiled` built it from
    this file as it is now (the forked workers and the in-process expander both look the
    class up here)."""
    global _Expander
    from model_check.explore import compiled

    module = compiled.load_explorer()
    if module is not None:
        _Expander = module._Expander


if __name__ == "model_check.explore.explorer":  # not in the compiled copy itself
    _use_compiled()
