"""Config: Kafka's key names, one-line errors naming file, line and key, and the variants."""

from __future__ import annotations

import dataclasses

import pytest

from spec.config import (
    CONFIG_KEYS,
    VARIANTS,
    Config,
    ConfigError,
    config_from_pairs,
    load_properties,
    parse_properties,
)

KNOWN_KEYS = ", ".join(CONFIG_KEYS)
KAFKA_KEYS = (
    "variant", "brokers", "partitions", "replication.factor", "acks", "min.insync.replicas",
    "unclean.leader.election.enable", "eligible.leader.replicas.enable",
    "last.known.leader.election.enable", "replica.lag.time.max.ms", "replica.lag.max.messages",
    "log.flush.interval.messages",
)


def parse_error(pairs) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        config_from_pairs(pairs)
    return info.value


# Defaults and parsing --------------------------------------------------------------------


def test_defaults_are_the_current_protocol_with_three_brokers():
    config = Config()
    assert config.variant is VARIANTS["current"]
    assert (config.brokers, config.partitions, config.acks) == (3, 1, "all")
    assert config.min_insync_replicas == 1
    assert config.unclean_leader_election_enable is False
    assert config.replica_lag_max_messages is None
    assert config.log_flush_interval_messages is None


def test_every_key_parses_to_its_field():
    config = parse_properties(
        "\n".join(
            [
                "variant=kip-279",
                "brokers=4",
                "partitions=2",
                "acks=1",
                "min.insync.replicas=2",
                "unclean.leader.election.enable=true",
                "replica.lag.time.max.ms=3",
                "replica.lag.max.messages=5",
                "log.flush.interval.messages=1",
                "max.records=7",
                "max.leader.epochs=6",
                "max.crashes=2",
                "max.session.expiries=3",
                "max.ticks=9",
            ]
        )
    )
    assert config == Config(
        brokers=4,
        partitions=2,
        variant=VARIANTS["kip-279"],
        acks="1",
        min_insync_replicas=2,
        unclean_leader_election_enable=True,
        replica_lag_time_max_ticks=3,
        replica_lag_max_messages=5,
        log_flush_interval_messages=1,
        max_records=7,
        max_leader_epochs=6,
        max_crashes=2,
        max_session_expiries=3,
        max_ticks=9,
    )


def test_properties_syntax_comments_colon_separator_and_spaces():
    text = "# a comment\n! another\n\n  brokers : 4 \nacks = -1\nunclean.leader.election.enable=TRUE\n"
    config = parse_properties(text, "x.properties")
    assert (config.brokers, config.acks, config.unclean_leader_election_enable) == (4, "all", True)


@pytest.mark.parametrize(
    ("text", "value"), [("true", True), ("True", True), ("false", False), ("FALSE", False)]
)
def test_boolean_spellings(text, value):
    config = config_from_pairs([("w", "unclean.leader.election.enable", text)])
    assert config.unclean_leader_election_enable is value


@pytest.mark.parametrize("text", ["yes", "1", "no", "0", "on", "\"false\""])
def test_only_true_and_false_are_booleans_as_in_kafka(text):
    with pytest.raises(ConfigError, match="unclean.leader.election.enable: expected true "
                                               "or false"):
        config_from_pairs([("w", "unclean.leader.election.enable", text)])


@pytest.mark.parametrize("text", ["٣", "3_0", "+3", " 3 3"])
def test_integers_are_plain_ascii_digits(text):
    with pytest.raises(ConfigError, match="brokers: expected an integer"):
        config_from_pairs([("w", "brokers", text)])


@pytest.mark.parametrize("text", ["1" * 40, "9" * 5000, "-" + "9" * 5000])
def test_an_integer_of_more_digits_than_a_long_is_refused_without_converting_it(text):
    with pytest.raises(ConfigError) as caught:
        config_from_pairs([("w:3", "brokers", text)])
    message = str(caught.value)
    assert message.startswith("w:3: brokers: ") and "does not fit Kafka's INT type" in message
    assert len(message) < 200


def test_a_huge_bad_value_is_echoed_cut_short():
    with pytest.raises(ConfigError) as caught:
        config_from_pairs([("w", "brokers", "x" * 5_000_000)])
    assert len(str(caught.value)) < 200 and str(caught.value).endswith("...'")


@pytest.mark.parametrize(("text", "acks"), [("0", "0"), ("1", "1"), ("all", "all"),
                                            ("ALL", "all"), ("-1", "all")])
def test_acks_spellings(text, acks):
    assert config_from_pairs([("w", "acks", text)]).acks == acks


@pytest.mark.parametrize("text", ["", "none", "never"])
def test_optional_integers_accept_none(text):
    base = Config(log_flush_interval_messages=3, replica_lag_max_messages=3)
    config = config_from_pairs(
        [("w", "log.flush.interval.messages", text), ("w", "replica.lag.max.messages", text)], base
    )
    assert config.log_flush_interval_messages is None
    assert config.replica_lag_max_messages is None


def test_pairs_change_the_base_config_only_where_given():
    base = Config(brokers=5, max_records=4)
    config = config_from_pairs([("w", "brokers", "2")], base)
    assert (config.brokers, config.max_records) == (2, 4)


def test_to_properties_round_trips_through_the_parser():
    config = Config(variant=VARIANTS["kip-101"], brokers=2, acks="0", replica_lag_max_messages=2,
                    unclean_leader_election_enable=True)
    properties = config.to_properties()
    assert properties["variant"] == "kip-101"
    assert properties["unclean.leader.election.enable"] == "true"
    assert "log.flush.interval.messages" not in properties  # None is left out
    text = "\n".join(f"{k}={v}" for k, v in properties.items())
    assert parse_properties(text) == config
    assert set(properties) <= set(CONFIG_KEYS)


def test_configs_hash_and_replace_validates():
    assert hash(Config()) == hash(Config())
    assert Config().replace(brokers=2).brokers == 2
    with pytest.raises(ConfigError, match=r"^brokers: must be between 1 and 9$"):
        Config().replace(brokers=10)


def test_assignment_follows_seed_003_placement():
    config = Config(brokers=3, partitions=4)
    assert [config.assignment(p) for p in range(4)] == [
        (0, 1, 2), (1, 2, 0), (2, 0, 1), (0, 1, 2)
    ]


# Errors -----------------------------------------------------------------------------------


def test_kafka_keys_come_first_then_semantic_switches_then_exploration_bounds():
    assert CONFIG_KEYS[: len(KAFKA_KEYS)] == KAFKA_KEYS
    rest = CONFIG_KEYS[len(KAFKA_KEYS):]
    assert rest[:4] == ("leader.keeps.last.fetch", "recovery.truncates.epoch.cache",
                        "isr.changes.async", "hw.over.requested.isr")
    assert rest[4:] and all(key.startswith("max.") for key in rest[4:])


def test_unknown_key():
    error = parse_error([("f:3", "foo.bar", "1")])
    assert str(error) == f"f:3: unknown key 'foo.bar' (known: {KNOWN_KEYS})"


@pytest.mark.parametrize("key", ["brokers", "max.records", "replica.lag.max.messages",
                                 "log.flush.interval.messages", "replica.lag.time.max.ms"])
def test_bad_integer(key):
    assert str(parse_error([("f:2", key, " x1 ")])) == f"f:2: {key}: expected an integer, got 'x1'"


def test_bad_boolean():
    error = parse_error([("f:1", "unclean.leader.election.enable", "maybe")])
    assert str(error) == "f:1: unclean.leader.election.enable: expected true or false, got 'maybe'"


def test_bad_acks():
    assert str(parse_error([("f:1", "acks", "2")])) == "f:1: acks: expected 0, 1, all or -1, got '2'"


def test_min_insync_replicas_above_brokers_names_the_line_of_that_key():
    error = parse_error([("f:1", "brokers", "2"), ("f:2", "min.insync.replicas", "3")])
    assert str(error) == "f:2: min.insync.replicas: must be between 1 and the number of brokers (2)"
    assert error.key == "min.insync.replicas"


def test_unknown_variant():
    error = parse_error([("f:1", "variant", "kip-999")])
    assert str(error) == (
        "f:1: variant: unknown variant 'kip-999' "
        "(known: hw-truncation, kip-101, kip-279, kip-320, current)"
    )


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("brokers", "0", "must be between 1 and 9"),
        ("partitions", "17", "must be between 1 and 16"),
        ("min.insync.replicas", "0", "must be between 1 and the number of brokers (3)"),
        ("replica.lag.time.max.ms", "-1", "must be >= 0"),
        ("replica.lag.max.messages", "0", "must be >= 1"),
        ("log.flush.interval.messages", "0", "must be >= 1"),
        ("max.records", "-1", "must be >= 0"),
        ("max.leader.epochs", "0", "must be >= 1"),
        ("max.crashes", "-1", "must be >= 0"),
        ("max.session.expiries", "-1", "must be >= 0"),
        ("max.ticks", "-1", "must be >= 0"),
    ],
)
def test_out_of_range_values(key, value, why):
    error = parse_error([("f:7", key, value)])
    assert str(error) == f"f:7: {key}: {why}"
    assert error.key == key


def test_properties_file_errors_carry_file_and_line(tmp_path):
    path = tmp_path / "bad.properties"
    path.write_text("# header\n\nbrokers=2\nacks=all\nbogus=1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_properties(path)
    assert str(info.value).startswith(f"{path}:5: unknown key 'bogus' (known: ")


def test_properties_file_bad_value_line(tmp_path):
    path = tmp_path / "bad.properties"
    path.write_text("brokers=2\nmax.crashes=lots\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_properties(path)
    assert str(info.value) == f"{path}:2: max.crashes: expected an integer, got 'lots'"


def test_properties_line_without_separator():
    with pytest.raises(ConfigError) as info:
        parse_properties("brokers=2\nacks all\n", "c.properties")
    assert str(info.value) == "c.properties:2: expected key=value, got 'acks all'"


def test_properties_range_error_names_the_line():
    with pytest.raises(ConfigError) as info:
        parse_properties("# two brokers\nbrokers=2\nmin.insync.replicas=3\n", "c.properties")
    assert str(info.value) == (
        "c.properties:3: min.insync.replicas: must be between 1 and the number of brokers (2)"
    )


def test_load_properties_reads_a_good_file(tmp_path):
    path = tmp_path / "good.properties"
    path.write_text("variant=kip-320\nbrokers=2\n", encoding="utf-8")
    config = load_properties(path)
    assert (config.variant.name, config.brokers) == ("kip-320", 2)


def test_missing_file(tmp_path):
    path = tmp_path / "absent.properties"
    with pytest.raises(ConfigError) as info:
        load_properties(path)
    assert str(info.value) == f"{path}: cannot read: No such file or directory"


def test_non_utf8_file(tmp_path):
    path = tmp_path / "latin1.properties"
    path.write_bytes(b"brokers=\xff\n")
    with pytest.raises(ConfigError) as info:
        load_properties(path)
    assert str(info.value) == f"{path}: not UTF-8 text"


# Variants ---------------------------------------------------------------------------------


def test_variant_rules():
    rules = {
        name: (v.truncation, v.fencing, v.expand_requires_epoch_start, v.broker_epochs,
               v.hw_requires_min_isr, v.isr_shrink_bumps_leader_epoch,
               v.missed_epoch_resets_followers)
        for name, v in VARIANTS.items()
    }
    assert rules == {
        "hw-truncation": ("high-watermark", False, False, False, False, True, False),
        "kip-101": ("epoch-end", False, False, False, False, True, False),
        "kip-279": ("epoch-end-279", False, False, False, False, True, False),
        "kip-320": ("diverging-epoch", True, True, False, False, True, False),
        "current": ("diverging-epoch", True, True, True, True, False, False),
    }


def test_with_rules_names_the_mutant():
    mutant = VARIANTS["current"].with_rules(fencing=False, broker_epochs=False)
    assert mutant.name == "current+broker_epochs=False,fencing=False"
    assert (mutant.fencing, mutant.broker_epochs, mutant.hw_requires_min_isr) == (False, False, True)
    assert VARIANTS["current"].fencing is True  # the original is untouched


def test_configs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().brokers = 4  # type: ignore[misc]


# One key table for both layers (vocab.config) -----------------------------------------------


def test_the_key_table_names_every_field_of_both_configs():
    from impl.config import ClusterConfig
    from vocab.config import CLUSTER_KEYS, KEYS, MODEL_KEYS, Layer

    assert CONFIG_KEYS == tuple(k.name for k in MODEL_KEYS)
    assert {k.model.field for k in MODEL_KEYS} == {f.name for f in dataclasses.fields(Config)}
    cluster_fields = {f.name for f in dataclasses.fields(ClusterConfig)}
    assert {k.cluster.field for k in CLUSTER_KEYS} == cluster_fields - {
        "bugs", "preferred_leader_check_interval_ms"}
    assert len({k.name for k in KEYS}) == len(KEYS)
    layers = {k.name: k.layer for k in KEYS}
    assert layers["acks"] is Layer.BOTH and layers["max.records"] is Layer.MODEL
    assert layers["session.timeout.ms"] is Layer.CLUSTER
    assert all(k.layer is Layer.MODEL for k in KEYS if k.bound)


def test_each_kind_in_the_table_matches_both_configs_defaults():
    from impl.config import ClusterConfig
    from vocab.config import ACKS_LEVELS, KEYS, VARIANT_NAMES, Kind

    fits = {
        Kind.INT: lambda v: isinstance(v, int) and not isinstance(v, bool),
        Kind.OPTIONAL_INT: lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)),
        Kind.BOOL: lambda v: isinstance(v, bool),
        Kind.ACKS: lambda v: v in ACKS_LEVELS,
        Kind.VARIANT: lambda v: getattr(v, "name", v) in VARIANT_NAMES,
    }
    for key in KEYS:
        for use, config in ((key.model, Config()), (key.cluster, ClusterConfig())):
            if use:
                assert fits[key.kind](getattr(config, use.field)), key.name


def test_variant_names_and_rule_names_are_the_same_in_spec_impl_and_vocab():
    from impl.config import VARIANTS as IMPL_VARIANTS
    from impl.config import VariantRules
    from vocab.config import RULE_NAMES, TRUNCATION_RULES, VARIANT_NAMES

    assert tuple(VARIANTS) == tuple(IMPL_VARIANTS) == VARIANT_NAMES
    spec_rules = tuple(f.name for f in dataclasses.fields(VARIANTS["current"]) if f.name != "name")
    assert spec_rules == tuple(f.name for f in dataclasses.fields(VariantRules)) == RULE_NAMES
    for name in VARIANT_NAMES:
        assert VARIANTS[name].truncation == IMPL_VARIANTS[name].truncation
        assert VARIANTS[name].truncation in TRUNCATION_RULES


def rule_disagreements(spec_variants: dict, impl_variants: dict) -> list[str]:
    """`variant rule: spec value != impl value` for each rule of each variant the two tables
    set differently."""
    from vocab.config import RULE_NAMES

    return [f"{name} {rule}: {getattr(variant, rule)!r} != {getattr(impl_variants[name], rule)!r}"
            for name, variant in spec_variants.items() for rule in RULE_NAMES
            if getattr(variant, rule) != getattr(impl_variants[name], rule)]


def test_spec_and_impl_variants_set_every_rule_alike():
    # Replay judges a broker run by the spec variant of the same name: a rule set differently
    # in the two tables would judge the broker by another protocol.
    from impl.config import VARIANTS as IMPL_VARIANTS

    assert rule_disagreements(VARIANTS, IMPL_VARIANTS) == []


def test_the_rule_comparison_fails_on_a_planted_mismatch():
    from impl.config import VARIANTS as IMPL_VARIANTS

    planted = dict(IMPL_VARIANTS)
    planted["kip-320"] = dataclasses.replace(planted["kip-320"], fencing=False)
    planted["current"] = dataclasses.replace(planted["current"], isr_shrink_bumps_leader_epoch=True)
    assert rule_disagreements(VARIANTS, planted) == [
        "kip-320 fencing: True != False", "current isr_shrink_bumps_leader_epoch: False != True"]


def integer_bounds(layer: str):
    """(key, field, lowest, highest) of every integer key with a numeric range in `layer`."""
    from vocab.config import KEYS, Kind

    for key in KEYS:
        use = getattr(key, layer)
        if use and key.kind in (Kind.INT, Kind.OPTIONAL_INT) and use.min is not None:
            yield key.name, use.field, use.min, use.max if isinstance(use.max, int) else None


def test_both_configs_accept_the_table_bounds_and_reject_one_beyond():
    from impl.config import ClusterConfig

    for layer, make in (("model", Config), ("cluster", ClusterConfig)):
        checked = 0
        for name, field, low, high in integer_bounds(layer):
            # Ranges that depend on another key: heartbeat below the session timeout, min ISR
            # at most the brokers.
            extra = {"heartbeat_interval_ms": {"session_timeout_ms": 10**6},
                     "session_timeout_ms": {"heartbeat_interval_ms": 1},
                     "brokers": {"min_insync_replicas": 1}}.get(field, {})
            for value in (low, high):
                if value is not None:
                    assert getattr(make(**{field: value}, **extra), field) == value
            for value in (low - 1, None if high is None else high + 1):
                if value is not None:
                    with pytest.raises(ConfigError) as info:
                        make(**{field: value}, **extra)
                    assert info.value.key == name and str(info.value).startswith(f"{name}: ")
                    checked += 1
        assert checked >= (12 if layer == "model" else 10), layer


def limit_disagreements() -> list[str]:
    """Brokers and partitions counts in 0..20 that exactly one of spec and cluster accepts."""
    from impl.config import ClusterConfig

    def accepts(make, **kw) -> bool:
        try:
            make(**kw)
        except ConfigError:
            return False
        return True

    out = []
    for field in ("brokers", "partitions"):
        for n in range(21):
            kw = {field: n, "min_insync_replicas": 1}
            if accepts(Config, **kw) != accepts(ClusterConfig, **kw):
                out.append(f"{field}={n}")
    return out


def test_brokers_and_partitions_limits_agree_between_spec_and_cluster():
    from impl.config import ClusterConfig

    assert limit_disagreements() == []
    for field, top in (("brokers", 9), ("partitions", 16)):
        assert getattr(Config(**{field: top}), field) == getattr(ClusterConfig(**{field: top}),
                                                                field) == top
        for make in (Config, ClusterConfig):
            with pytest.raises(ConfigError, match=f"^{field}: must be between 1 and {top}$"):
                make(**{field: top + 1})


def test_the_limits_check_fails_when_the_cluster_has_its_own_range(monkeypatch):
    import impl.config
    from vocab.config import Use

    mutant = tuple(dataclasses.replace(k, cluster=Use("brokers", 1)) if k.name == "brokers" else k
                   for k in impl.config.CLUSTER_KEYS)
    monkeypatch.setattr(impl.config, "CLUSTER_KEYS", mutant)
    assert limit_disagreements() == [f"brokers={n}" for n in range(10, 21)]


def test_range_messages_name_the_bound_a_range_depends_on():
    from impl.config import ClusterConfig

    with pytest.raises(ConfigError, match=r"^min.insync.replicas: must be between 1 and "
                       r"the number of brokers \(2\)$"):
        ClusterConfig(brokers=2, min_insync_replicas=3)
    with pytest.raises(ConfigError, match="^session.timeout.ms: must exceed heartbeat"):
        ClusterConfig(session_timeout_ms=300, heartbeat_interval_ms=300)


# The one .properties reader (vocab.properties) ---------------------------------------------


def test_reader_keeps_order_and_where_and_takes_the_last_of_a_repeated_key():
    from vocab.config import Layer
    from vocab.properties import read_pairs, settings

    text = "# c\n! c\n\nacks = 1\nbrokers:4\n  acks=all  \nlog.flush.interval.messages=never\n"
    pairs = read_pairs(text, "f")
    assert pairs == [("f:4", "acks", "1"), ("f:5", "brokers", "4"), ("f:6", "acks", "all"),
                     ("f:7", "log.flush.interval.messages", "never")]
    typed = [(s.where, s.key.name, s.value) for s in settings(pairs, Layer.CLUSTER)]
    assert typed == [("f:4", "acks", "1"), ("f:5", "brokers", 4), ("f:6", "acks", "all"),
                     ("f:7", "log.flush.interval.messages", None)]
    assert parse_properties(text).acks == "all"


@pytest.mark.parametrize(("text", "layer", "message"), [
    ("=3\n", "model", "f:1: expected key=value, got '=3'"),
    ("brokers 3\n", "cluster", "f:1: expected key=value, got 'brokers 3'"),
    ("max.records=1\n", "cluster",
     "f:1: max.records: an exploration bound of the model, not a cluster setting"),
    ("replica.lag.max.messages=2\n", "cluster",
     "f:1: replica.lag.max.messages: a rule of the model only, not a cluster setting"),
    ("#\nsession.timeout.ms=9\n", "model",
     "f:2: session.timeout.ms: a cluster setting, not used by the model"),
    ("acks=2\n", "cluster", "f:1: acks: expected 0, 1, all or -1, got '2'"),
    ("variant=kip-1\n", "cluster", "f:1: variant: unknown variant 'kip-1' "
     "(known: hw-truncation, kip-101, kip-279, kip-320, current)"),
])
def test_reader_errors_are_one_line_naming_file_line_and_key(text, layer, message):
    from vocab.config import Layer
    from vocab.properties import PropertiesError, read_pairs, settings

    with pytest.raises(PropertiesError) as info:
        settings(read_pairs(text, "f"), Layer(layer))
    assert str(info.value) == message


def test_cluster_keys_are_listed_for_an_unknown_key():
    from vocab.config import CLUSTER_KEYS, Layer
    from vocab.properties import PropertiesError, read_pairs, settings

    with pytest.raises(PropertiesError) as info:
        settings(read_pairs("x.y=1\n", "f"), Layer.CLUSTER)
    assert str(info.value) == (
        f"f:1: unknown key 'x.y' (known: {', '.join(k.name for k in CLUSTER_KEYS)})")


# The cluster and campaign commands honour the file ------------------------------------------

# A value for every cluster key, each different from the default.
FILE_VALUES = {
    "variant": "kip-101", "brokers": 4, "partitions": 2, "replication.factor": 3, "acks": "1",
    "min.insync.replicas": 1,
    "unclean.leader.election.enable": True, "eligible.leader.replicas.enable": True,
    "last.known.leader.election.enable": False, "replica.lag.time.max.ms": 700,
    "log.flush.interval.messages": 3, "replica.fetch.wait.max.ms": 150, "replica.fetch.max.bytes": 65536,
    "replica.fetch.backoff.ms": 40, "session.timeout.ms": 2000, "heartbeat.interval.ms": 250,
    "request.timeout.ms": 1200,
}


def write_properties(path, values: dict) -> None:
    def text(value):
        return ("true" if value else "false") if isinstance(value, bool) else str(value)

    path.write_text("# every cluster key, none at its default\n"
                    + "".join(f"{k} = {text(v)}\n" for k, v in values.items()), encoding="utf-8")


def header_config(trace_dir) -> dict:
    import json

    first = (trace_dir / "b0.ndjson").read_text(encoding="utf-8").splitlines()[0]
    header = json.loads(first)
    assert header["kind"] == "header"
    return header["config"]


def expected_fields(values: dict) -> dict:
    from vocab.config import KEYS_BY_NAME

    return {KEYS_BY_NAME[k].cluster.field: v for k, v in values.items()}


def test_the_file_differs_from_every_cluster_default():
    from impl.config import ClusterConfig
    from vocab.config import CLUSTER_KEYS

    assert set(FILE_VALUES) == {k.name for k in CLUSTER_KEYS}
    default = ClusterConfig()
    for field, value in expected_fields(FILE_VALUES).items():
        assert getattr(default, field) != value, field


def fields_not_from_the_file(tmp_path) -> list[str]:
    """Run `cluster sim --config F` with FILE_VALUES; the header fields that differ from F."""
    from isrlab.cli import main

    path = tmp_path / "c.properties"
    write_properties(path, FILE_VALUES)
    out = tmp_path / "run"
    assert main(["cluster", "sim", "--config", str(path), "--duration", "2s",
                 "--trace-out", str(out)]) == 0
    config = header_config(out)
    return sorted(f for f, v in expected_fields(FILE_VALUES).items() if config[f] != v)


def test_cluster_sim_runs_exactly_the_file(tmp_path, capsys):
    assert fields_not_from_the_file(tmp_path) == []
    assert "4 brokers, 2 partitions" in capsys.readouterr().out


def test_the_file_check_fails_when_flag_defaults_override_the_file(tmp_path, monkeypatch):
    # The mutant: flags carry the built-in defaults, so they always overwrite the file.
    import isrlab.cmd_cluster
    from isrlab.options import add_cluster_options

    def with_defaults(p):
        add_cluster_options(p)
        p.set_defaults(brokers=3, partitions=1, variant="current", acks="all", min_isr=2)

    monkeypatch.setattr(isrlab.cmd_cluster, "add_cluster_options", with_defaults)
    assert fields_not_from_the_file(tmp_path) == [
        "acks", "brokers", "min_insync_replicas", "partitions", "variant"]


def test_a_flag_given_beside_the_file_wins(tmp_path):
    from isrlab.cli import main

    path = tmp_path / "c.properties"
    write_properties(path, FILE_VALUES)
    out = tmp_path / "run"
    assert main(["cluster", "sim", "--config", str(path), "--duration", "1s", "--acks", "-1",
                 "--min-isr", "2", "--variant", "current", "--brokers", "3", "--partitions", "1",
                 "--no-unclean", "--flush-interval", "1", "--trace-out", str(out)]) == 0
    flags = {"acks": "all", "min.insync.replicas": 2, "variant": "current", "brokers": 3,
             "partitions": 1, "unclean.leader.election.enable": False,
             "log.flush.interval.messages": 1}
    config = header_config(out)
    for field, value in expected_fields({**FILE_VALUES, **flags}).items():
        assert config[field] == value, field


def test_campaign_runs_exactly_the_file(tmp_path, capsys):
    import json

    from isrlab.cli import main

    path = tmp_path / "c.properties"
    write_properties(path, FILE_VALUES)
    out = tmp_path / "corpus"
    code = main(["campaign", "--config", str(path), "--runs", "1", "--duration", "2s",
                 "--keep", "all", "--out", str(out), "--json", "--workers", "1"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["divergences"] == 0
    written = json.loads((out / "campaign.json").read_text(encoding="utf-8"))["config"]
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    for config in (written, header_config(run)):
        for field, value in expected_fields(FILE_VALUES).items():
            assert config[field] == value, field


@pytest.mark.parametrize(("text", "line", "message"), [
    ("acks=1\nmin.insync.replicas=two\n", 2, "min.insync.replicas: expected an integer, got 'two'"),
    ("brokers=2\nmin.insync.replicas=3\n", 2,
     "min.insync.replicas: must be between 1 and the number of brokers (2)"),
    ("# one broker, the default min ISR is 2\nbrokers=1\n", 2,
     "min.insync.replicas: must be between 1 and the number of brokers (1)"),
    ("partitions=17\n", 1, "partitions: must be between 1 and 16"),
    ("acks=1\nmax.crashes=1\n", 2, "max.crashes: an exploration bound of the model, not a "
     "cluster setting"),
    ("acks all\n", 1, "expected key=value, got 'acks all'"),
])
@pytest.mark.parametrize("command", ["cluster", "campaign"])
def test_a_bad_file_exits_2_with_one_line_naming_file_line_and_key(text, line, message, command,
                                                                   tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    path = tmp_path / "bad.properties"
    path.write_text(text, encoding="utf-8")
    argv = (["cluster", "sim", "--trace-out", str(tmp_path / "out")] if command == "cluster"
            else ["campaign", "--runs", "1", "--out", str(tmp_path / "out")])
    proc = subprocess.run([sys.executable, "-m", "isrlab.cli", *argv, "--config", str(path)],
                          capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 2
    assert proc.stderr == f"isrlab {command}: error: {path}:{line}: {message}\n"
    assert proc.stdout == "" and not (tmp_path / "out").exists()


def test_a_missing_file_exits_2(tmp_path, capsys):
    from isrlab.cli import main

    path = tmp_path / "absent.properties"
    with pytest.raises(SystemExit) as exit_:  # refused where the options are parsed
        main(["cluster", "sim", "--config", str(path), "--trace-out", str(tmp_path)])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        f"isrlab cluster sim: error: argument --config: '{path}': No such file or directory\n")


def test_every_run_the_cluster_accepts_replays(tmp_path, capsys):
    from isrlab.cli import main

    out = tmp_path / "big"
    assert main(["cluster", "sim", "--brokers", "9", "--partitions", "16", "--min-isr", "9",
                 "--nemesis", "crash", "--duration", "3s", "--trace-out", str(out)]) == 0
    capsys.readouterr()
    assert main(["replay", str(out), "--json"]) == 0
    assert '"verdict": "accepted"' in capsys.readouterr().out
    for flag, value in (("--brokers", "10"), ("--partitions", "17")):
        assert main(["cluster", "sim", flag, value, "--trace-out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("isrlab cluster: error: ") and err.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_prove_reads_the_file_over_its_own_defaults(tmp_path, capsys):
    import json

    from isrlab.cli import main

    path = tmp_path / "c.properties"
    path.write_text("acks=1\n", encoding="utf-8")
    assert main(["prove", "--bmc", "0", "--config", str(path), "--json"]) == 0
    config = json.loads(capsys.readouterr().out)["config"]
    assert (config["acks"], config["brokers"], config["max.crashes"]) == ("1", "2", "1")


@pytest.mark.parametrize(("line", "message"), [
    ("request.timeout.ms=0", "request.timeout.ms: must be >= 1"),
    ("replica.lag.time.max.ms=-5", "replica.lag.time.max.ms: must be >= 1"),
    ("unclean.leader.election.enable=yes",
     "unclean.leader.election.enable: expected true or false, got 'yes'"),
])
def test_cluster_config_values_are_range_checked_before_a_run(tmp_path, capsys, line, message):
    from isrlab.cli import main

    path = tmp_path / "c.properties"
    path.write_text(line + "\n", encoding="utf-8")
    assert main(["cluster", "sim", "--duration", "1", "--config", str(path),
                 "--trace-out", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"isrlab cluster: error: {path}:1: {message}"]
    assert not (tmp_path / "run").exists()
