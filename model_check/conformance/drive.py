"""Directed runs: a schedule of spec actions drives the implementation's cores, step by step.

Replay (model_check/conformance/replay.py) checks one direction: whatever the broker did must be a spec
behaviour. A directed run checks the other: a path the spec can take (a counterexample, an
explorer path, a scenario) is imposed on the real sans-I/O cores, and the run's trace and client
histories show what the implementation does there (Mocket, EuroSys 2023, does the same for
Raft implementations).

Theory of operation. `DrivenCluster` is the simulator's cluster with the scheduler taken out:
the caller decides which message is delivered, which node's timer fires, which broker crashes,
flushes or restarts, when a write is produced and when the consumer polls. `drive` walks the
schedule. For each spec action it tries every input the cluster could take now, each on a copy
of the cluster and of an incremental replay, and keeps the input whose trace lines the replay's
refinement mapping turns into exactly the next actions of the schedule (a Tick or a silent
message drop the mapping inserts is allowed). So the mapping from spec actions to
implementation inputs is the replay's own mapping, read backwards: one place for both
directions. When no input takes the next action at once, the driver takes a quiet input (one
whose lines map to no spec step: a heartbeat delivered, a timer that sends nothing the spec
sees) and tries again, up to `QUIET_MAX` times. When nothing works the run stops at that step
and reports the spec action, the spec state the replay reached, and the implementation's view
of every replica, side by side.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from impl.config import ClusterConfig
from impl.sim import SimOptions, Simulation, header_config
from impl.trace import NodeTrace
from model_check.conformance.replay import IncrementalReplay
from model_check.explore.scenario import parse
from spec.invariants import violations
from vocab.config import BUG_RULES

TIMER_FIRINGS_MAX = 10_000  # per advance: a core whose deadline never moves is a bug
HEALTHY_TICK_MS = 10
HEALTHY_DELIVERIES_MAX = 200  # per tick of a healthy stretch
QUIET_MAX = 150  # quiet inputs tried before a spec step counts as not followed
IGNORED = ("Tick", "NetworkDropFetch")  # spec steps the mapping may insert on its own
EXTRA = ("LeaderAckProduce", "ConsumerRead")  # see _consumes
PULL_WINDOW = 16  # how far ahead a step may be taken early (see _consumes)
# Steps the implementation may take where the schedule has none: a follower fetches again at
# once after an answer; the spec lets that fetch sit in flight (see _consumes).
UNSCHEDULED = ("FollowerSendFetch",)
# Inputs on one broker that a wanted step of that broker waits for: a live broker's session
# expires only once its heartbeats stop arriving (isolate); a restart or a healed link lets it
# register again.
BROKER_INPUT_FOR = {
    "isolate": ("ControllerHandleBrokerFailure",),
    "restart": ("BrokerRestart",),
    "heal": ("BrokerRegister", "BrokerRestart"),
}


class _Lines(list):
    """An append-only list whose items are never changed: a copy of the driver (one per input
    tried) copies the list, not each line again."""

    def __deepcopy__(self, memo) -> _Lines:
        return _Lines(self)


class _Seen(set):
    """A set of immutable spec states: a copy of the driver copies the set, not the states."""

    def __deepcopy__(self, memo) -> _Seen:
        return _Seen(self)


class _JournaledTrace(NodeTrace):
    """A node's trace that also appends each line's body to one journal shared by all nodes,
    so the machine knows the order in which lines were written across nodes."""

    __slots__ = ("journal",)

    def __init__(self, node: str, header: dict, journal: list[dict]):
        self.journal = journal
        super().__init__(node, header)
        self.lines = _Lines(self.lines)

    def event(self, *args, **kwargs) -> None:
        super().event(*args, **kwargs)
        self.journal.append(json.loads(self.lines[-1]))

    def other(self, body: dict) -> None:
        super().other(body)
        self.journal.append(json.loads(self.lines[-1]))


class DrivenCluster(Simulation):
    """The simulator's cluster with the scheduler taken out: the caller decides what happens
    next. Sends go to per-link FIFO queues (`in_flight`) instead of the event heap."""

    def __init__(self, config: ClusterConfig):
        self.journal: list[dict] = _Lines()
        self.refused: list[tuple[str, str]] = []  # (sender, peer): connects not yet reported
        self.sent_order: dict[str, int] = {}  # message id -> global send number
        self.torn = 0
        off = tuple(sorted(BUG_RULES[bug] for bug in config.bugs if bug in BUG_RULES))
        # No duration: a driven run ends when its schedule does, which replay then accepts.
        super().__init__(config, SimOptions(seed=0, commit="impl-model", trace=True,
                                            spec_rules_off=off, duration_ms=None))
        self.queue.clear()  # the event heap is never run; time is advanced by `advance`

    def _new_trace(self, node: str, header: dict) -> NodeTrace:
        return _JournaledTrace(node, header, self.journal)

    def _schedule_timer(self, node: str) -> None:
        """Timers are polled by `advance` through `next_deadline()`; nothing to schedule."""

    def _torn_bytes(self) -> int:
        return self.torn

    def _send(self, src: str, dst: str, mid: str, message) -> None:
        if not self.alive.get(dst) or frozenset((src, dst)) in self.cut:
            # As in the simulator: lost, and the sender learns it (here when a rule says so).
            self._drop(src, dst, mid, message, "unreachable")
            self.refused.append((src, dst))
            return
        self.sent_order[mid] = len(self.sent_order)
        self.in_flight.setdefault((src, dst), {})[mid] = message

    # What the rules do -----------------------------------------------------------------------

    def links(self) -> list[tuple[str, str]]:
        return sorted(link for link, queue in self.in_flight.items() if queue)

    def deliver(self, link: tuple[str, str]) -> None:
        mid, message = next(iter(self.in_flight[link].items()))
        self._deliver(link[0], link[1], mid, message, self.link_gen.get(link, 0))

    def deliver_oldest(self) -> bool:
        links = self.links()
        if not links:
            return False
        self.deliver(min(links, key=lambda link: self.sent_order[next(iter(self.in_flight[link]))]))
        return True

    def run_healthy(self, ms: int) -> None:
        """A healthy stretch: deliver everything in flight, then 10 ms pass; `ms` long."""
        for _ in range(ms // HEALTHY_TICK_MS):
            for _ in range(HEALTHY_DELIVERIES_MAX):
                if not self.deliver_oldest():
                    break
            self.advance(HEALTHY_TICK_MS)

    def break_link(self, link: tuple[str, str]) -> None:
        self._break_links(link[0], [link[1]])

    def report_refused(self) -> None:
        src, dst = self.refused.pop(0)
        if hasattr(self.cores[src], "on_disconnected"):
            self._input(src, lambda core: core.on_disconnected(self.now, dst))

    def advance(self, ms: int) -> None:
        """Move the clock `ms` forward, firing every due timer at its deadline, in order."""
        target = self.now + ms
        for _ in range(TIMER_FIRINGS_MAX):
            if not self.fire_next_timer(target):
                return
        raise AssertionError(f"timers keep firing at {self.now} ms: a deadline does not move")

    def fire_next_timer(self, end: int) -> bool:
        """Fire the earliest timer of a live node if it is due by `end` (the clock moves to its
        deadline); else move the clock to `end` and say False."""
        due = [(self.cores[n].next_deadline(), n) for n in sorted(self.cores) if self.alive[n]]
        deadline, node = min(due)
        if deadline > end:
            self.now = end
            return False
        self.now = max(self.now, deadline)
        self._input(node, lambda core: core.on_timer(self.now))
        return True

    def crash(self, node: str, torn_bytes: int) -> None:
        self.torn = torn_bytes
        self.traces["nemesis"].other(
            {"kind": "nemesis", "time_ms": self.now, "f": "crash", "target": node})
        self._crash(node)

    def restart(self, node: str) -> None:
        self.traces["nemesis"].other(
            {"kind": "nemesis", "time_ms": self.now, "f": "restart", "target": node})
        self._restart(node)

    def flush(self, node: str) -> None:
        self._input(node, lambda core: core.flush_all())

    def produce(self) -> None:
        value = self.next_value
        self.next_value += 1
        self._input("producer", lambda core: core.invoke(self.now, value))

    def learn_leaders(self) -> None:
        """The producer asks the metadata store for every partition's leader now."""
        self._input("producer", lambda core: core.refresh(self.now))

    def poll(self) -> None:
        for p, waiting in enumerate(self.consumer.waiting):
            if waiting is None:
                self.consumer.poll_at[p] = self.now
        self._input("consumer", lambda core: core.on_timer(self.now))


    # Inputs a driver can choose from ----------------------------------------------------------

    def producer_busy(self) -> bool:
        """Whether a write is queued or in flight at the producer."""
        return any(self.producer.queue) or any(f is not None for f in self.producer.in_flight)

    def fire(self, node: str) -> None:
        """Move the clock to `node`'s next deadline (if later) and fire its timer."""
        deadline = self.cores[node].next_deadline()
        self.now = max(self.now, deadline)
        self._input(node, lambda core: core.on_timer(self.now))

    def isolate(self, node: str) -> None:
        """Cut `node` off from the metadata store (its session will expire while it runs)."""
        self.cut.add(frozenset((node, "meta")))
        self._break_links(node, ["meta"])

    def heal(self, node: str) -> None:
        self.cut.discard(frozenset((node, "meta")))

    def deliver_message(self, link: tuple[str, str], mid: str) -> None:
        message = self.in_flight[link][mid]
        self._deliver(link[0], link[1], mid, message, self.link_gen.get(link, 0))


# Directed runs -----------------------------------------------------------------------------


@dataclass
class Input:
    """One thing the cluster can be made to do now: a label for people, and the call."""

    label: str
    kind: str
    args: tuple

    def apply(self, cluster: DrivenCluster) -> None:
        getattr(cluster, self.kind)(*self.args)


@dataclass
class DriveResult:
    """How far a schedule got on the implementation."""

    followed: int  # spec actions the implementation took
    total: int
    inputs: list[str] = field(default_factory=list)  # what was done, in order
    stuck: dict | None = None  # the step not followed, spec and implementation side by side
    # The first spec invariant broken in the replayed state while the schedule ran (a bug
    # whose harm is transient shows here, not in the run's final state): invariant, detail,
    # and how many schedule steps had been followed.
    violation: dict | None = None

    @property
    def complete(self) -> bool:
        return self.followed == self.total and self.stuck is None


class Driver:
    """Imposes a schedule of spec actions (name, args) on a `DrivenCluster`."""

    def __init__(self, config: ClusterConfig, collect_states: bool = False):
        self.config = config
        self.cluster = DrivenCluster(config)
        self.replay = IncrementalReplay(header_config(config, self.cluster.options))
        self.taken: list = _Lines()  # spec actions are immutable
        rp = self.replay.replayer
        rp.taken = self.taken
        if collect_states:  # every spec state the replay reaches (model_check/conformance/coverage.py)
            rp.visited = _Seen({rp.state})
        self.fed = 0

    @property
    def visited(self) -> set:
        return self.replay.replayer.visited

    # Candidates --------------------------------------------------------------------------

    def inputs(self) -> list[Input]:
        c = self.cluster
        out = []
        for link in c.links():
            for mid, message in c.in_flight[link].items():
                out.append(Input(f"deliver {type(message).__name__} {mid} {link[0]}->{link[1]}",
                                 "deliver_message", (link, mid)))
        for node in sorted(c.cores):
            if c.alive[node] and c.cores[node].next_deadline() < (1 << 61):
                out.append(Input(f"timer {node}", "fire", (node,)))
        for b in c.brokers:
            if frozenset((b, "meta")) in c.cut:
                out.append(Input(f"heal {b}-meta", "heal", (b,)))
            elif c.alive[b]:
                out.append(Input(f"cut {b}-meta", "isolate", (b,)))
            if c.alive[b]:
                out.append(Input(f"flush {b}", "flush", (b,)))
                out.append(Input(f"crash {b}", "crash", (b, 0)))
            else:
                out.append(Input(f"restart {b}", "restart", (b,)))
        out.append(Input("produce", "produce", ()))
        if any(at >= (1 << 61) for at in c.producer.metadata_at):
            out.append(Input("producer asks for leaders", "learn_leaders", ()))
        out.append(Input("consumer poll", "poll", ()))
        if c.refused:
            out.append(Input("report refused connection", "report_refused", ()))
        return out

    def _try(self, move: Input):
        """(steps taken, the driver after the move) on a copy; None on a divergence."""
        rp = self.replay.replayer
        # Immutable parts are shared with the copy: the spec state and the configs.
        shared = (rp.state, rp.config, self.replay.config, self.config)
        trial = copy.deepcopy(self, {id(x): x for x in shared})
        before = len(trial.taken)
        # One ms per input: the run's lines then have one order by time, the order they were
        # written in, which is how a replay of the written run will read them.
        trial.cluster.now += 1
        move.apply(trial.cluster)
        batch = trial.cluster.journal[trial.fed:]
        trial.fed = len(trial.cluster.journal)
        if trial.replay.feed(batch) is not None:
            return None
        return [(a.name, a.args()) for a in trial.taken[before:]], trial

    # Walking a schedule ------------------------------------------------------------------

    def _matching(self, want: list) -> tuple | None:
        """The first input whose steps the schedule `want` accounts for (see `_consumes`):
        (input, what is left of the schedule, the driver after it); and the quiet inputs."""
        quiet = []
        for move in self.inputs():
            tried = self._try(move)
            if tried is None:
                continue
            steps, trial = tried
            left = _consumes(steps, want)
            if left is not None:
                return (move, left, trial), quiet
            # Quiet: no spec step, or only a refetch the schedule can do without (the spec
            # lets a fetch wait in flight; the replay checks the path actually taken).
            if all(s[0] in UNSCHEDULED + IGNORED for s in steps) and move.kind in (
                    "deliver_message", "fire", "produce", "report_refused", "restart",
                    "isolate", "heal", "learn_leaders"):
                quiet.append((move, trial))
        return None, quiet

    def drive(self, schedule: list[tuple[str, dict]],
              progress: Callable[..., None] | None = None) -> DriveResult:
        """Impose `schedule` (spec action names and args) on the cluster, as far as it goes;
        `progress(followed, inputs=...)` before each input is chosen."""
        result = DriveResult(0, len(schedule))
        want = [(n, dict(a)) for n, a in schedule]
        fallbacks = 0
        while want:
            if progress is not None:
                progress(result.followed, inputs=len(result.inputs))
            found, quiet = self._matching(want)
            if found is None and fallbacks == 0:
                # One quiet input first (a message delivered, a timer, a write produced), then
                # the step: a write reaches the leader only once the producer sent it.
                for first, trial in quiet:
                    inner, _ = trial._matching(want)
                    if inner is not None:
                        self.__dict__.update(trial.__dict__)
                        result.inputs.append(first.label + " (quiet)")
                        found = inner
                        break
            if found is not None:
                move, want, trial = found
                self.__dict__.update(trial.__dict__)
                result.inputs.append(move.label)
                result.followed = len(schedule) - len(want)
                fallbacks = 0
                self._answer_clients(result)
                self._check(result)
                continue
            if quiet and fallbacks < QUIET_MAX:
                # Deliveries before timers: a timer moves the clock, and time makes sessions
                # and followers expire.
                move, trial = min(quiet, key=lambda q: self._urgency(q[0], want))
                self.__dict__.update(trial.__dict__)
                result.inputs.append(move.label + " (quiet)")
                fallbacks += 1
                self._check(result)
                continue
            result.stuck = self.side_by_side(want[0])
            break
        return result

    def _check(self, result: DriveResult) -> None:
        if result.violation is None:
            rp = self.replay.replayer
            found = violations(rp.config, rp.state)
            if found:
                result.violation = {"invariant": found[0][0], "detail": found[0][1],
                                    "followed": result.followed}

    def _answer_clients(self, result: DriveResult) -> None:
        """Deliver the answers waiting for the producer at once: in the spec a write is
        acknowledged when the leader answers, and a client that never hears the answer (the
        leader crashes next) would not know its write was acknowledged."""
        for link in self.cluster.links():
            if link[1] != "producer":
                continue
            for mid in list(self.cluster.in_flight[link]):
                move = Input(f"deliver answer {mid} {link[0]}->producer", "deliver_message",
                             (link, mid))
                tried = self._try(move)
                if tried is not None and not tried[0]:
                    self.__dict__.update(tried[1].__dict__)
                    result.inputs.append(move.label + " (quiet)")

    def _producer_target(self, want: list) -> tuple[int, int] | None:
        """(partition, broker) the schedule's next write must be sent to, when known now: the
        broker a `ProducerSend` names (metadata from before a leader change), or the
        controller's leader when the write is the next step."""
        for k, (name, args) in enumerate(want):
            if name == "ProducerSend":
                if "broker" in args:
                    return args["partition"], args["broker"]
                if k == 0:
                    p = args["partition"]
                    return p, self.cluster.cores["meta"].partitions[p].leader
                return None
        return None

    def _urgency(self, move: Input, want: list) -> tuple:
        """Which quiet input to take while the next action is not yet possible: a write
        produced when one is wanted, the producer's metadata when the write must go to a
        leader it does not know (yet, or any more), then messages delivered, then the timer
        due first (time passes in deadline order, as it would)."""
        name, args = want[0]
        if move.kind == "learn_leaders":
            target = self._producer_target(want)
            if target is None:
                return (9, 0)
            p, broker = target
            c = self.cluster
            stale = c.producer.leaders[p] != broker
            return (0 if stale and c.cores["meta"].partitions[p].leader == broker else 9, 0)
        producing = name in ("ProducerSend", "LeaderAppend")
        if move.kind == "produce":
            return (0 if producing and not self.cluster.producer_busy() else 9, 0)
        if move.kind in BROKER_INPUT_FOR:
            wanted = (name in BROKER_INPUT_FOR[move.kind]
                      and move.args[0] == f"b{args.get('broker')}")
            return (0 if wanted else 9, 0)
        if move.kind in ("deliver_message", "report_refused"):
            return (1, 0)
        if move.kind == "fire":
            # The consumer polls on its own timer; its reads change no replica.
            late = move.args[0] == "consumer"
            return (2 + late, self.cluster.cores[move.args[0]].next_deadline())
        return (3, 0)

    def _settle(self, ms: int) -> None:
        """Deliver everything, oldest first, and let timers fire, 1 ms per input (see _try)."""
        c = self.cluster
        end = c.now + ms
        while c.now < end:
            c.now += 1
            if not c.deliver_oldest() and not c.fire_next_timer(end):
                break

    def side_by_side(self, step: tuple[str, dict]) -> dict:
        name, args = step
        state = self.replay.replayer.state
        impl = {node: [core.replica_state(r) for r in core.replicas]
                for node, core in self.cluster.cores.items()
                if node.startswith("b") and self.cluster.alive[node]}
        options = []
        for move in self.inputs():
            tried = self._try(move)
            if tried is not None and tried[0]:
                options.append({"input": move.label, "spec_steps": [
                    f"{n}({', '.join(f'{k}={v}' for k, v in a.items())})" for n, a in tried[0]]})
        return {"action": name, "args": args, "spec_state": repr(state),
                "implementation": impl, "instead": options}

    def finish(self, settle_ms: int = 3_000):
        """The driven run as a simulator result: the schedule's end, then a healthy stretch
        of `settle_ms` (every message delivered, time passing) so the producer hears its
        answers and the consumer reads what the brokers kept."""
        self._settle(settle_ms)
        self.cluster.now += 1
        self.cluster.poll()
        self._settle(500)
        return self.cluster._result()


def _parties(step: tuple[str, dict]) -> frozenset[str]:
    """Whose state a step reads or writes: the brokers it names (a leader's step also touches
    its follower's connection), the controller for its own steps, for ISR changes (atomic at
    the store in the spec) and for a broker's registration, crash or restart (sessions and
    broker epochs), or the client for a client's own step. Steps with no party in common
    commute in the spec."""
    name, args = step
    if name == "Tick":
        return frozenset({"*"})  # time: every leader's lag and every session
    parties = {f"b{args[key]}" for key in ("broker", "follower") if key in args}
    if name.startswith("Controller") or "Isr" in name or "AlterPartition" in name or \
            name in ("BrokerCrash", "BrokerRestart", "BrokerRegister"):
        parties.add("controller")
    return frozenset(parties or {name})  # ProducerSend, ConsumerRead: the client's own


def _consumes(steps: list, want: list) -> list | None:
    """What is left of the schedule `want` after the spec steps `steps`, or None when they do
    not fit it. Each step must be the schedule's next action, or a later action that shares no
    party with the actions before it (the two commute: the implementation took its
    next step early, as a follower fetches again at once after an answer); or one of `EXTRA`
    (an acknowledgement, a read: they change no replica), which the implementation takes in
    the same input that moves the high watermark, where the schedule takes it later or never;
    or one of `UNSCHEDULED` that the schedule does not take soon. The replay checks every step
    of the path actually taken, so a looser fit here never admits a non-spec behaviour: it only
    decides what counts as following the schedule."""
    left = list(want)
    progressed = False
    for step in steps:
        if left and step == left[0]:
            left.pop(0)
            progressed = True
            continue
        if step[0] in IGNORED:
            continue  # inserted by the mapping where the schedule has none
        parties = _parties(step)
        # A crash or restart loses the messages to and from the broker: it commutes with
        # nothing that involves them, so it is never taken early.
        # A write goes where the producer's metadata points, which the steps before it change.
        window = 1 if step[0] in ("BrokerCrash", "BrokerRestart", "ProducerSend") else PULL_WINDOW
        for k in range(1, min(len(left), window)):
            if left[k] == step:
                if step[0] in EXTRA or not any(_parties(x) & parties or x[0] == "Tick"
                                               for x in left[:k]):
                    del left[k]
                    progressed = True
                    break
                return None
        else:
            if step[0] not in EXTRA + UNSCHEDULED:
                return None
    return left if progressed else None


_ACTION_LINE = re.compile(r"^([A-Z][A-Za-z]+)\(([^()]*)\): (.*)$")


def load_schedule(path: Path) -> tuple[dict, list[tuple[str, dict]]]:
    """(spec config, actions) of a counterexample (`isrlab check --json` output) or of a
    scenario transcript (its first `config` section: the actions its expectations show taken,
    each line written by the spec's own rendering of an action)."""
    text = Path(path).read_text(encoding="utf-8")
    if text.lstrip().startswith("{"):
        body = json.loads(text)
        violation = body.get("violation") or body
        trace = violation.get("trace") if isinstance(violation, dict) else None
        if not isinstance(trace, list):
            raise ValueError("no counterexample trace (expected isrlab check --json output "
                             "with a violation)")
        steps = [(s["action"], s["args"]) for s in trace if s.get("action")]
        return body.get("config", {}), steps
    blocks = parse(text, str(path))
    config = dict(word.split("=", 1) for word in blocks[0].command.split()[1:])
    steps = []
    for block in blocks[1:]:
        if block.command.startswith("config"):
            break  # the transcript goes on with another variant
        for line in block.expected:
            m = _ACTION_LINE.match(line)
            if m and not m.group(3).startswith("not enabled"):
                args = dict(pair.split("=", 1) for pair in m.group(2).split(", ") if pair)
                steps.append((m.group(1), {k: int(v) for k, v in args.items()}))
    return config, steps
