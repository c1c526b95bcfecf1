"""The deterministic simulator: every node of a cluster in one process, under virtual time.

Theory of operation. A seeded scheduler owns one priority queue of (time ms, order, event).
Events are message deliveries, node timers, workload steps and nemesis faults; each is handed
to the sans-I/O core it concerns and the effects are carried out at once: sends are queued with
a seeded per-link delay (FIFO per link, as over TCP), disk effects go to the broker's
`MemoryDisk` storage, transitions and history lines go to the node's trace. Nothing reads a
wall clock and every random choice comes from one `random.Random(seed)`, so a seed and a
commit give the same trace bytes every time.

The network: a link is cut by a partition (messages sent across it are lost, both ends learn
the connection broke) or slowed; a crashed node loses what was in flight to and from it. The
exception is the controller's LeaderAndIsr to a live broker: it waits for the link to heal, as
Kafka's controller queues its requests to each broker and sends one until it is answered,
dropping the queue only when the broker dies (a KRaft broker fetches the metadata log again).
Without that, a broker cut off while its partition changed leader kept its old view for ever.
The driven cluster of `model_check` (which never calls `run`) loses it, as the spec may.
The nemesis: crash (kill -9: the unflushed suffix is lost; restart after a while), pause (a
GC pause: the node handles nothing, its session may expire), partition (one broker cut off
from everyone, or from the metadata store only), slow (extra delay on a broker's links).
Message faults, each on one broker's messages for a while at a rate drawn from the seed:
drop (a replication message, Fetch or its answer, is lost and neither end is told, as when
one end takes a connection for broken: traced as a drop), duplicate (a message arrives twice;
the transport delivers each message id once and discards the copy, since TCP never
duplicates and the spec has no duplicates), delay (a link between the broker and one other
node is slowed; FIFO per link is kept, as over TCP). Only replication messages are dropped:
the reference store sends a LeaderAndIsr or an answer once, relying on connections that
break loudly, where a KRaft broker pulls the metadata log again.
By default one fault at a time, so a majority always stays healthy (`max_faults` allows more).

Liveness (as TigerBeetle's VOPR): at `duration_ms` every fault still on heals at once (crashed
brokers restart, paused ones resume, cut links and message faults heal), and within
`liveness_ms` every partition must have a leader and its whole replica set in the store's ISR
and acknowledge a write sent after the heal; the run stops when it does, and otherwise fails
with the summary's `liveness` line naming each partition that did not. A full ISR can always
return here: no fault destroys a broker's disk, and a broker that comes back rejoins (after
an unclean election it truncates first).
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from pathlib import Path

from impl.broker_storage import BrokerStorage
from impl.config import ClusterConfig
from impl.protocol.broker import BrokerCore, broker_node
from impl.protocol.clients import ConsumerCore, ProducerCore
from impl.protocol.effects import apply_effects, trace_drop
from impl.protocol.messages import (
    Fetch,
    FetchResponse,
    History,
    LeaderAndIsr,
    OffsetsForLeaderEpoch,
    Recall,
    Transition,
)
from impl.protocol.meta import MetaCore
from impl.storage import HEADER_BYTES, MemoryDisk
from impl.trace import (
    NodeTrace,
    dumps,
    event_counts,
    header_config,
    reproduce_command,
    write_final_logs,
)
from vocab.actions import ActionName as A
from vocab.outcomes import Code

# isr-kill: "what if every ISR replica dies?" (KIP-966's last replica standing): the followers of
# a partition's leader are cut off one by one until the ISR is the leader alone, then the leader
# loses power (its unflushed records are gone) and comes back once its session has expired.
# isr-kill-process: the same, but only the process dies (the page cache survives: nothing lost).
# isr-kill-all: every replica of the partition loses power at once (a site outage) and they come
# back one by one after their sessions expired: no replica is left that kept everything.
ISR_KILLS = ("isr-kill", "isr-kill-process", "isr-kill-all")
MESSAGE_FAULTS = ("drop", "duplicate", "delay")
NEMESIS_KINDS = ("crash", "partition", "pause", "slow", *ISR_KILLS, *MESSAGE_FAULTS)
# Messages a drop fault may lose: a follower gives up a fetch it gets no answer to.
DROPPABLE = (Fetch, OffsetsForLeaderEpoch, FetchResponse)
LIVENESS_CHECK_MS = 100  # how often the liveness phase looks at the cluster

_DELIVER, _TIMER, _WRITE, _NEMESIS, _UNREACHABLE, _CHECK = range(6)


@dataclass(frozen=True, slots=True)
class SimOptions:
    seed: int = 0
    duration_ms: int = 60_000
    nemesis: tuple[str, ...] = ()
    write_interval_ms: int = 50
    poll_interval_ms: int = 100
    link_delay_ms: tuple[int, int] = (1, 4)
    fault_interval_ms: tuple[int, int] = (2_000, 6_000)
    fault_length_ms: tuple[int, int] = (500, 4_000)
    max_faults: int = 1  # faults at once (1: a majority always stays healthy)
    # A fixed fault schedule instead of the seeded nemesis: (at ms, kind, broker node, length
    # ms); kinds: crash, crash-process (the page cache survives: flushed first), pause,
    # partition (from everyone), partition-meta (from the store only), partition-brokers (from
    # the other brokers only), slow.
    faults: tuple[tuple[int, str, str, int], ...] = ()
    torn_writes: bool = True
    # After the faults heal at duration_ms, how long the cluster has to recover (0: no check).
    liveness_ms: int = 10_000
    # Spec rules the run is judged without (written in the header for replay): a directed run
    # of a planted bug that is one of them switched off (vocab.config.BUG_RULES).
    spec_rules_off: tuple[str, ...] = ()
    commit: str = "unknown"
    trace: bool = True


@dataclass
class SimResult:
    seed: int
    run: str
    config: ClusterConfig
    options: SimOptions
    summary: dict
    traces: dict[str, str] = field(default_factory=dict)  # node -> NDJSON text
    final_logs: dict[int, list[list[int]]] = field(default_factory=dict)

    def write(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for node, text in sorted(self.traces.items()):
            (directory / f"{node}.ndjson").write_text(text, encoding="utf-8")
        body = self.run_json()
        # Beside run.json, not in it: a long run's logs outgrow the longest line replay reads.
        body.update(write_final_logs(directory, body.pop("final_logs")))
        (directory / "run.json").write_text(dumps(body) + "\n", encoding="utf-8")

    def run_json(self) -> dict:
        return {
            "run": self.run, "seed": self.seed, "mode": "sim", "commit": self.options.commit,
            "config": header_config(self.config, self.options), "summary": self.summary,
            "final_logs": {str(p): log for p, log in self.final_logs.items()},
            "command": reproduce_command(self.config, self.options),
        }


class Simulation:
    def __init__(self, config: ClusterConfig, options: SimOptions):
        self.config = config
        self.options = options
        self.rng = random.Random(options.seed)
        self.now = 0
        self.queue: list[tuple] = []
        self.order = 0
        n = config.brokers
        self.brokers = [broker_node(b) for b in range(n)]
        header = {"seed": options.seed, "commit": options.commit, "mode": "sim",
                  "run": f"seed-{options.seed}", "config": header_config(config, options)}
        nodes = [*self.brokers, "meta", "producer", "consumer", "nemesis"]
        self.traces = {node: self._new_trace(node, header) for node in nodes}
        self.meta = MetaCore(config)
        self.storage = {b: BrokerStorage(MemoryDisk(), config.partitions) for b in self.brokers}
        self.cores: dict[str, object] = {"meta": self.meta}
        views = [self.meta.initial_view(p) for p in range(config.partitions)]
        for b in range(n):
            core = BrokerCore(b, config)
            for effect in core.bootstrap(views):
                self.storage[self.brokers[b]].apply(effect)
            self.cores[self.brokers[b]] = core
        self.producer = ProducerCore(config.partitions, config.acks, config.request_timeout_ms)
        self.consumer = ConsumerCore(config.partitions, options.poll_interval_ms,
                                     config.request_timeout_ms)
        self.cores["producer"] = self.producer
        self.cores["consumer"] = self.consumer
        self.alive = {node: True for node in self.cores}
        self.paused_until: dict[str, int] = {}
        self.backlog: dict[str, list] = {}
        self.link_gen: dict[tuple[str, str], int] = {}
        self.link_last: dict[tuple[str, str], int] = {}
        self.in_flight: dict[tuple[str, str], dict[str, object]] = {}  # link -> id -> message
        self.recalled: set[str] = set()  # ids taken back before their delivery (see _recall)
        self.cut: set[frozenset] = set()
        self.slow: dict[str, int] = {}
        self.wake: dict[str, int] = {}
        self.incarnations: dict[str, int] = {}  # broker node -> restarts so far
        self.spins: dict[str, int] = {}  # a core whose deadline never moves is a bug: stop
        self.next_value = 1
        self.faulted: set[str] = set()  # brokers under a fault now
        self.active: dict[tuple[str, str], None] = {}  # (kind, target) of faults on now
        self.lossy: dict[str, float] = {}  # broker -> drop rate of its replication messages
        self.duplicating: dict[str, float] = {}  # broker -> rate of its messages sent twice
        self.delayed: dict[frozenset, int] = {}  # link -> extra delay ms
        self.delivered: set[str] = set()  # message ids delivered (or lost): copies discarded
        self.holding = False  # whether LeaderAndIsr waits out a cut link (set by `run`)
        self.held: dict[str, list[tuple[str, object]]] = {}  # broker -> (id, LeaderAndIsr)
        self.healed_at: int | None = None  # when the liveness phase began
        self.acked_since_heal: set[int] = set()  # partitions with a write acknowledged since
        self.live_after_ms: int | None = None
        self.stats = {"elections": 0, "isr_shrinks": 0, "isr_expands": 0, "crashes": 0,
                      "pauses": 0, "partitions": 0, "dropped_messages": 0, "events": 0,
                      "message_faults": 0, "duplicated_messages": 0, "duplicates_discarded": 0}
        for node in self.cores:
            self._schedule_timer(node)
        self._push(options.write_interval_ms, _WRITE, None)
        if options.faults:
            for at, kind, target, length in options.faults:
                self._push(at, _NEMESIS, ("start", kind, target, length))
        elif options.nemesis:
            self._push(self._between(options.fault_interval_ms), _NEMESIS, None)

    def _new_trace(self, node: str, header: dict) -> NodeTrace:
        """The trace of one node (a test driver may return a subclass that also journals)."""
        return NodeTrace(node, header, enabled=self.options.trace)

    # Scheduling ------------------------------------------------------------------------------

    def _push(self, time: int, kind: int, data: object) -> None:
        self.order += 1
        heapq.heappush(self.queue, (time, self.order, kind, data))

    def _between(self, bounds: tuple[int, int]) -> int:
        return self.now + self.rng.randint(*bounds)

    def _schedule_timer(self, node: str) -> None:
        core = self.cores.get(node)
        if core is None or not self.alive[node]:
            return
        deadline = max(core.next_deadline(), self.now)
        if deadline < self.wake.get(node, 1 << 62):
            self.wake[node] = deadline
            self._push(deadline, _TIMER, node)

    # Running ---------------------------------------------------------------------------------

    def run(self) -> SimResult:
        self.holding = True
        self._run_until(self.options.duration_ms)
        if self.options.liveness_ms:
            self.now = max(self.now, self.options.duration_ms)
            self._heal_all()
            self._push(self.now, _CHECK, None)
            self._run_until(self.healed_at + self.options.liveness_ms)
        return self._result()

    def _run_until(self, end: int) -> None:
        while self.queue and self.queue[0][0] <= end and self.live_after_ms is None:
            time, _, kind, data = heapq.heappop(self.queue)
            self.now = time
            if kind == _DELIVER:
                self._deliver(*data)
            elif kind == _TIMER:
                if self.wake.get(data) == time:
                    del self.wake[data]
                    self._input(data, lambda core: core.on_timer(self.now))
                    if self.wake.get(data) == time:
                        spins = self.spins.get(data, 0) + 1
                        self.spins[data] = spins
                        if spins > 1000:
                            raise RuntimeError(f"{data}: timer keeps firing at {time} ms")
                    else:
                        self.spins.pop(data, None)
            elif kind == _WRITE:
                value = self.next_value
                self.next_value += 1
                self._input("producer", lambda core, v=value: core.invoke(self.now, v))
                jitter = self.rng.randint(0, self.options.write_interval_ms)
                self._push(self.now + self.options.write_interval_ms // 2 + jitter, _WRITE, None)
            elif kind == _NEMESIS:
                self._nemesis(data)
            elif kind == _UNREACHABLE:
                src, dst = data
                if hasattr(self.cores[src], "on_disconnected"):
                    self._input(src, lambda core, dst=dst: core.on_disconnected(self.now, dst))
            elif kind == _CHECK:
                if not self._not_live():
                    self.live_after_ms = self.now - self.healed_at
                else:
                    self._push(self.now + LIVENESS_CHECK_MS, _CHECK, None)

    def _input(self, node: str, call) -> None:
        """Hand an input to a node's core (queued while it is paused) and apply the effects."""
        if not self.alive.get(node):
            return
        if node in self.paused_until:
            self.backlog[node].append(call)
            return
        effects = call(self.cores[node])
        self._apply(node, effects)
        self._schedule_timer(node)

    def _apply(self, node: str, effects: list) -> None:
        apply_effects(effects, self.now, self.traces[node], _NodeEffects(self, node))
        if self.healed_at is not None and node == "producer":
            for effect in effects:
                if type(effect) is History and effect.body.get("type") == "ok":
                    self.acked_since_heal.add(effect.body["partition"])

    def _count(self, t: Transition) -> None:
        for key, n in event_counts(t.action, t.outcome, t.outcome_args).items():
            self.stats[key] += n

    def _waits(self, src: str, dst: str, message) -> bool:
        """Whether a message that cannot travel now waits for the link (see the module doc)."""
        return (self.holding and src == "meta" and type(message) is LeaderAndIsr
                and bool(self.alive.get(dst)))

    def _send(self, src: str, dst: str, mid: str, message) -> None:
        if frozenset((src, dst)) in self.cut and self._waits(src, dst, message):
            self.held.setdefault(dst, []).append((mid, message))
            return
        if not self.alive.get(dst) or frozenset((src, dst)) in self.cut:
            self._drop(src, dst, mid, message, "unreachable")
            # As a TCP connect fails: the sender learns the peer is unreachable.
            self._push(self.now + 1, _UNREACHABLE, (src, dst))
            return
        if self.lossy and type(message) in DROPPABLE:
            rate = max(self.lossy.get(src, 0.0), self.lossy.get(dst, 0.0))
            if rate and self.rng.random() < rate:
                self._drop(src, dst, mid, message, "nemesis")  # neither end is told
                return
        low, high = self.options.link_delay_ms
        delay = self.rng.randint(low, high) + self.slow.get(src, 0) + self.slow.get(dst, 0)
        if self.delayed:
            delay += self.delayed.get(frozenset((src, dst)), 0)
        link = (src, dst)
        at = max(self.now + delay, self.link_last.get(link, 0))  # FIFO, as over TCP
        self.link_last[link] = at
        self.in_flight.setdefault(link, {})[mid] = message
        gen = self.link_gen.get(link, 0)
        self._push(at, _DELIVER, (src, dst, mid, message, gen))
        if self.duplicating:
            rate = max(self.duplicating.get(src, 0.0), self.duplicating.get(dst, 0.0))
            if rate and self.rng.random() < rate:
                self.stats["duplicated_messages"] += 1
                self._push(at + self.rng.randint(0, high), _DELIVER, (src, dst, mid, message, gen))

    def _recall(self, src: str, recall: Recall) -> None:
        """A follower's request to its old leader dies with the fetcher's connection, if it
        is still on the way or unread at a paused leader."""
        def recalled(message) -> bool:
            return (type(message) in (Fetch, OffsetsForLeaderEpoch)
                    and message.partition == recall.partition)

        link = (src, recall.dst)
        for mid, message in list(self.in_flight.get(link, {}).items()):
            if recalled(message):
                del self.in_flight[link][mid]
                self.recalled.add(mid)
                self._drop(src, recall.dst, mid, message, "recalled")
        kept = []
        for call in self.backlog.get(recall.dst, ()):
            held = getattr(call, "message", None)
            if held is not None and held[0] == src and recalled(held[2]):
                self._drop(src, recall.dst, held[1], held[2], "recalled")
            else:
                kept.append(call)
        if recall.dst in self.backlog:
            self.backlog[recall.dst] = kept

    def _drop(self, src: str, dst: str, mid: str, message, why: str) -> None:
        self.stats["dropped_messages"] += 1
        trace_drop(self.traces["nemesis"], self.now, src, dst, mid, message, why)

    def _deliver(self, src: str, dst: str, mid: str, message, gen: int) -> None:
        if mid in self.delivered:
            self.stats["duplicates_discarded"] += 1
            return  # a copy: the transport hands each message id over once
        self.delivered.add(mid)
        if gen != self.link_gen.get((src, dst), 0):
            return  # lost (and logged) when the link broke
        if mid in self.recalled:
            self.recalled.discard(mid)
            return  # lost (and logged) when it was recalled
        self.in_flight[(src, dst)].pop(mid, None)
        call = lambda core: core.on_message(self.now, src, mid, message)  # noqa: E731
        call.message = (src, mid, message)  # so a crash of `src` can take it back
        self._input(dst, call)

    def _break_links(self, node: str, peers) -> None:
        """Connections between `node` and `peers` break: in-flight messages are lost and the
        live ends are told."""
        for peer in peers:
            for link in ((node, peer), (peer, node)):
                self.link_gen[link] = self.link_gen.get(link, 0) + 1
                for mid, message in self.in_flight.pop(link, {}).items():
                    if self._waits(link[0], link[1], message):
                        self.held.setdefault(link[1], []).append((mid, message))
                    else:
                        self._drop(link[0], link[1], mid, message, "connection lost")
                # Messages waiting unread at a paused receiver die with the connection too
                # (the spec's crash loses every message to and from the crashed broker).
                src, dst = link
                if dst in self.backlog:
                    kept = []
                    for call in self.backlog[dst]:
                        held = getattr(call, "message", None)
                        if (held is not None and held[0] == src
                                and not self._waits(src, dst, held[2])):
                            self._drop(src, dst, held[1], held[2], "connection lost")
                        else:
                            kept.append(call)
                    self.backlog[dst] = kept
            for a, b in ((node, peer), (peer, node)):
                if self.alive.get(a) and hasattr(self.cores[a], "on_disconnected"):
                    call = lambda core, b=b: core.on_disconnected(self.now, b)  # noqa: E731
                    call.disconnect = True
                    self._input(a, call)

    # Nemesis ---------------------------------------------------------------------------------

    def _nemesis(self, data) -> None:
        opts = self.options
        if self.healed_at is not None:
            return  # the liveness phase: every fault has healed, and no new one starts
        if data is not None and data[0] == "start":
            _, kind, target, length = data
            self.faulted.add(target)
            self._start_fault(kind, target, length)
            return
        if data is not None:
            self._heal(data)
            self.faulted.discard(data[1])
            return
        self._push(self._between(opts.fault_interval_ms), _NEMESIS, None)
        healthy = [b for b in self.brokers if b not in self.faulted]
        if len(self.faulted) >= opts.max_faults or not healthy:
            return
        kind = self.rng.choice(opts.nemesis)
        if kind in ISR_KILLS:
            if not self.faulted:
                self._isr_kill(kind)
            return
        target = self.rng.choice(healthy)
        self.faulted.add(target)
        length = self.rng.randint(*opts.fault_length_ms)
        if kind == "partition" and self.rng.random() >= 0.5:
            kind = "partition-meta"
        self._start_fault(kind, target, length)

    def _isr_kill(self, kind: str) -> None:
        """Schedule the isr-kill sequence on a partition whose ISR is full (see ISR_KILLS)."""
        p = self.rng.randrange(self.config.partitions)
        record = self.meta.partitions[p]
        if record.leader < 0 or len(record.isr) < self.config.brokers or self.config.brokers < 2:
            return
        leader = broker_node(record.leader)
        followers = [broker_node(b) for b in self.config.assignment(p) if b != record.leader]
        lag = self.config.replica_lag_time_max_ms
        self.faulted.update(self.brokers)  # no other fault until each part heals
        if kind == "isr-kill-all":
            back = self.config.session_timeout_ms + 2 * self.config.heartbeat_interval_ms
            # Now, not pushed for later: a fault at this instant must come before the deliveries
            # already queued for it (as the seeded nemesis's own faults do), or the run could
            # show a message received from a broker that had already crashed.
            for i, node in enumerate([leader, *followers]):
                self._start_fault("crash", node, back + i * 1000)
            return
        # Each follower is cut after the previous one has had time to leave the ISR.
        crash_at = self.now + len(followers) * (lag + lag // 2) + lag // 2
        heal_at = crash_at + self.config.session_timeout_ms + 2 * self.config.heartbeat_interval_ms
        for i, follower in enumerate(followers):
            at = self.now + i * (lag + lag // 2)
            if i == 0:
                self._start_fault("partition-brokers", follower, heal_at - at)
            else:
                self._push(at, _NEMESIS, ("start", "partition-brokers", follower, heal_at - at))
        crash = "crash" if kind == "isr-kill" else "crash-process"
        self._push(crash_at, _NEMESIS, ("start", crash, leader, heal_at + 1000 - crash_at))

    def _start_fault(self, kind: str, target: str, length: int) -> None:
        log = self.traces["nemesis"]
        others = [n for n in self.cores if n != target]
        self.active[(kind, target)] = None
        if kind in ("crash", "crash-process"):
            self.stats["crashes"] += 1
            log.other({"kind": "nemesis", "time_ms": self.now, "f": "crash", "target": target})
            if kind == "crash-process" and self.alive[target]:
                # Only the process dies: the OS writes the page cache back.
                self._apply(target, self.cores[target].flush_all())
            self._crash(target)
        elif kind == "pause":
            self.stats["pauses"] += 1
            log.other({"kind": "nemesis", "time_ms": self.now, "f": "pause", "target": target})
            self.paused_until[target] = self.now + length
            self.backlog[target] = []
        elif kind in ("partition", "partition-meta", "partition-brokers"):
            self.stats["partitions"] += 1
            cut_from = {"partition": others, "partition-meta": ["meta"],
                        "partition-brokers": [b for b in self.brokers if b != target]}[kind]
            groups = [[target], sorted(n for n in self.cores if n not in (target,))]
            if kind != "partition":
                groups = [sorted(n for n in self.cores if n not in cut_from),
                          sorted(cut_from)]
            log.other({"kind": "nemesis", "time_ms": self.now, "f": "partition",
                       "target": target, "groups": groups})
            for peer in cut_from:
                self.cut.add(frozenset((target, peer)))
            self._break_links(target, cut_from)
        elif kind == "slow":
            delay = self.rng.randint(20, 1500)  # up to past replica.lag.time.max.ms
            log.other({"kind": "nemesis", "time_ms": self.now, "f": "slow", "target": target,
                       "delay_ms": delay})
            self.slow[target] = delay
        elif kind in MESSAGE_FAULTS:
            self.stats["message_faults"] += 1
            line = {"kind": "nemesis", "time_ms": self.now, "f": kind, "target": target}
            if kind == "delay":
                peer = self.rng.choice(sorted(n for n in (*self.brokers, "meta") if n != target))
                line.update(groups=[[target], [peer]], delay_ms=self.rng.randint(20, 1500))
                self.delayed[frozenset((target, peer))] = line["delay_ms"]
            else:
                # The rate is the seed's; the nemesis line format has no field for it.
                rate = self.rng.uniform(0.05, 0.5)
                (self.lossy if kind == "drop" else self.duplicating)[target] = rate
            log.other(line)
        self._push(self.now + length, _NEMESIS, (kind, target))

    def _heal(self, data) -> None:
        kind, target = data
        log = self.traces["nemesis"]
        self.active.pop((kind, target), None)
        if kind in ("crash", "crash-process"):
            log.other({"kind": "nemesis", "time_ms": self.now, "f": "restart", "target": target})
            self._restart(target)
        elif kind == "pause":
            log.other({"kind": "nemesis", "time_ms": self.now, "f": "resume", "target": target})
            del self.paused_until[target]
            backlog = self.backlog.pop(target)
            # Broken connections first: the spec loses every message to and from a crashed
            # or cut-off peer, so a resumed broker must not handle what it buffered from one.
            backlog.sort(key=lambda call: not getattr(call, "disconnect", False))
            for call in backlog:
                self._input(target, call)
            self._schedule_timer(target)
            self._input(target, lambda core: core.on_timer(self.now))
        elif kind.startswith("partition"):
            log.other({"kind": "nemesis", "time_ms": self.now, "f": "heal", "target": target})
            self.cut = {c for c in self.cut if target not in c}
            for dst in sorted(self.held):
                if frozenset(("meta", dst)) not in self.cut:
                    for mid, message in self.held.pop(dst):
                        self._send("meta", dst, mid, message)
        elif kind == "slow":
            log.other({"kind": "nemesis", "time_ms": self.now, "f": "heal", "target": target})
            self.slow.pop(target, None)
        elif kind in MESSAGE_FAULTS:
            log.other({"kind": "nemesis", "time_ms": self.now, "f": "heal", "target": target})
            self.lossy.pop(target, None)
            self.duplicating.pop(target, None)
            self.delayed = {link: ms for link, ms in self.delayed.items() if target not in link}

    def _heal_all(self) -> None:
        """The end of the faults: every one still on heals now, and none starts after."""
        for kind, target in list(self.active):
            self._heal((kind, target))
        for node in self.brokers:  # a crash whose fault line was not the seeded nemesis's
            if not self.alive[node]:
                self._heal(("crash", node))
        self.faulted.clear()
        self.healed_at = self.now

    def _end_ms(self) -> int:
        """When the run ended: at its duration, or when the liveness phase ended (a run
        without a duration, a driven one, ends now)."""
        if self.options.duration_ms is None:
            return self.now
        if self.healed_at is None:
            return self.options.duration_ms
        if self.live_after_ms is not None:
            return self.healed_at + self.live_after_ms
        return self.healed_at + self.options.liveness_ms

    def _not_live(self) -> list[str]:
        """What keeps the cluster from having recovered: per partition, a leader missing, a
        replica missing from the store's ISR, or no write acknowledged since the heal."""
        problems = []
        for p, ps in enumerate(self.meta.partitions):
            replicas = sorted(self.config.assignment(p))
            if ps.leader < 0 or not self.alive[broker_node(ps.leader)]:
                problems.append(f"p{p}: no leader")
            elif sorted(ps.isr) != replicas:
                problems.append(f"p{p}: ISR {sorted(ps.isr)} of {replicas}")
            elif p not in self.acked_since_heal:
                problems.append(f"p{p}: no write acknowledged")
        return problems

    def _crash(self, node: str) -> None:
        self.alive[node] = False
        self.wake.pop(node, None)
        self.paused_until.pop(node, None)
        self.backlog.pop(node, None)
        storage = self.storage[node]
        storage.disk.crash(torn_bytes=self._torn_bytes())
        storage.open()
        recovered = storage.recovered()
        self.incarnations[node] = self.incarnations.get(node, 0) + 1
        core = BrokerCore(int(node[1:]), self.config, recovered,
                          incarnation=self.incarnations[node])
        state = {"replicas": [core.replica_state(r) for r in core.replicas]}
        torn_bytes = sum(r.torn_bytes for r in storage.reports)
        self.traces[node].event(self.now, A.BROKER_CRASH, {"broker": int(node[1:])},
                                Code.CRASHED, {}, state, [], None, {"torn_bytes": torn_bytes})
        self.cores[node] = core
        self._break_links(node, [n for n in self.cores if n != node])
        for mid, message in self.held.pop(node, ()):
            self._drop("meta", node, mid, message, "connection lost")

    def _torn_bytes(self) -> int:
        """How many bytes of the unflushed tail a crash leaves on disk. A torn tail is part of
        one frame: the OS got some bytes of the buffer, never a whole record (a crash loses
        exactly the unflushed records: docs/protocol.md, "Crashes and flushing")."""
        return self.rng.randint(0, HEADER_BYTES - 1) if self.options.torn_writes else 0

    def _restart(self, node: str) -> None:
        self.alive[node] = True
        self._apply(node, self.cores[node].start(self.now))
        self._schedule_timer(node)

    # Result ----------------------------------------------------------------------------------

    def _result(self) -> SimResult:
        final_logs = {}
        for p in range(self.config.partitions):
            # The final log: the leader's whole log (a new leader's HW can lag behind records
            # that were committed and acknowledged), or none when the partition is offline.
            leader = self.meta.partitions[p].leader
            if leader >= 0 and self.alive[broker_node(leader)]:
                r = self.cores[broker_node(leader)].replicas[p]
                final_logs[p] = [[o, r.log[o][1]] for o in range(r.leo)]
        leaders = {p: ps.leader for p, ps in enumerate(self.meta.partitions)}
        summary = {
            **self.stats,
            "duration_ms": self.options.duration_ms,
            "leaders": {str(p): b for p, b in leaders.items()},
            "writes_acked": self.producer.stats["ok"],
            "writes_failed": self.producer.stats["fail"],
            "writes_unknown": self.producer.stats["info"],
            "reads": self.consumer.reads,
            "unclean_elections": self.meta.unclean_elections,
            "end_ms": self._end_ms(),
        }
        if self.healed_at is not None:
            summary["healed_ms"] = self.healed_at
            if self.live_after_ms is not None:
                summary["live_after_ms"] = self.live_after_ms
            else:
                waited = self.options.liveness_ms
                summary["liveness"] = "; ".join(f"{problem} {waited} ms after the faults healed"
                                                for problem in self._not_live())
        traces = {node: t.text() for node, t in self.traces.items()} if self.options.trace else {}
        return SimResult(self.options.seed, f"seed-{self.options.seed}", self.config,
                         self.options, summary, traces, final_logs)


class _NodeEffects:
    """The simulator's handlers of one node's effects (`impl.protocol.effects.Handlers`)."""

    __slots__ = ("sim", "node")

    def __init__(self, sim: Simulation, node: str):
        self.sim = sim
        self.node = node

    def send(self, dst: str, mid: str, message, now: int) -> None:
        self.sim._send(self.node, dst, mid, message)

    def traced(self, transition: Transition) -> None:
        self.sim.stats["events"] += 1
        self.sim._count(transition)

    def sent(self) -> None:
        pass

    def store(self, effect) -> None:
        self.sim.storage[self.node].apply(effect)

    def recall(self, recall: Recall) -> None:
        self.sim._recall(self.node, recall)


def simulate(config: ClusterConfig, options: SimOptions) -> SimResult:
    return Simulation(config, options).run()
