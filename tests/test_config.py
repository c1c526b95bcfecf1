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
    "variant", "brokers", "partitions", "acks", "min.insync.replicas",
    "unclean.leader.election.enable", "replica.lag.time.max.ms", "replica.lag.max.messages",
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
    text = "# a comment\n! another\n\n  brokers : 4 \nacks = -1\nunclean.leader.election.enable=YES\n"
    config = parse_properties(text, "x.properties")
    assert (config.brokers, config.acks, config.unclean_leader_election_enable) == (4, "all", True)


@pytest.mark.parametrize(
    ("text", "value"), [("true", True), ("yes", True), ("1", True), ("false", False),
                        ("No", False), ("0", False)]
)
def test_boolean_spellings(text, value):
    config = config_from_pairs([("w", "unclean.leader.election.enable", text)])
    assert config.unclean_leader_election_enable is value


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
    assert rest[:2] == ("leader.keeps.last.fetch", "recovery.truncates.epoch.cache")
    assert rest[2:] and all(key.startswith("max.") for key in rest[2:])


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
               v.hw_requires_min_isr, v.isr_shrink_bumps_leader_epoch)
        for name, v in VARIANTS.items()
    }
    assert rules == {
        "hw-truncation": ("high-watermark", False, False, False, False, True),
        "kip-101": ("epoch-end", False, False, False, False, True),
        "kip-279": ("epoch-end-279", False, False, False, False, True),
        "kip-320": ("diverging-epoch", True, True, False, False, True),
        "current": ("diverging-epoch", True, True, True, True, False),
    }


def test_with_rules_names_the_mutant():
    mutant = VARIANTS["current"].with_rules(fencing=False, broker_epochs=False)
    assert mutant.name == "current+broker_epochs=False,fencing=False"
    assert (mutant.fencing, mutant.broker_epochs, mutant.hw_requires_min_isr) == (False, False, True)
    assert VARIANTS["current"].fencing is True  # the original is untouched


def test_configs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().brokers = 4  # type: ignore[misc]
