"""Periodic schedules without a database: validation at the call, ticks, DST."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from sa_jobqueue import ConfigurationError, JobQueue
from tests.support.models import Job

UTC = timezone.utc
PARIS = ZoneInfo("Europe/Paris")


@pytest.fixture
def jobs() -> JobQueue[Job]:
    queue = JobQueue(Job)

    @queue.task("report", queue="reports")
    def report(ctx):  # pragma: no cover - never run
        pass

    return queue


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "0 3 * * *", "kind": "nope"}, "kind 'nope' is not registered"),
        ({"cron": "61 3 * * *"}, "bad cron expression '61 3 \\* \\* \\*'"),
        ({"cron": "0 3 * *"}, "bad cron expression"),
        ({"cron": "every day"}, "bad cron expression"),
        ({"cron": "0 3 30 2 *"}, "bad cron expression|never matches"),
        ({"cron": "0 3 * * *", "timezone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"cron": "0 3 * * *", "timezone": "../etc/passwd"}, "unknown time zone"),
        ({"cron": "0 3 * * *", "timezone": 2}, "timezone= must be an IANA zone name"),
        ({"cron": "0 3 * * *", "every": 30}, "exactly one of cron= or every="),
        ({}, "exactly one of cron= or every="),
        ({"every": 0.5}, "at least 1 second, not 0.5s"),
        ({"every": timedelta(milliseconds=999)}, "at least 1 second"),
        ({"every": -5}, "every"),
        ({"every": "30s"}, "every"),
        ({"every": 30, "timezone": "Europe/Paris"}, "timezone= applies to cron= only"),
        ({"cron": 5}, "cron= must be a str"),
        ({"every": 30, "payload": {"x": object()}}, "payload"),
        ({"every": 30, "queue": ""}, "queue"),
    ],
)
def test_periodic_rejects_bad_definitions_at_the_call(jobs, kwargs, message):
    kind = kwargs.pop("kind", "report")
    with pytest.raises(ConfigurationError, match=message):
        jobs.periodic(kind, **kwargs)
    assert jobs.schedules == {}


def test_periodic_names_the_schedule_and_refuses_a_second_of_the_same_name(jobs):
    first = jobs.periodic("report", cron="0 3 * * *", timezone="Europe/Paris")
    assert first.name == "report"
    assert first.spec == "cron 0 3 * * * Europe/Paris"
    with pytest.raises(ConfigurationError, match="already scheduled"):
        jobs.periodic("report", every=60)
    second = jobs.periodic("report", every=timedelta(minutes=1), name="report_often")
    assert second.spec == "every 60s"
    assert second.timezone == "UTC"
    assert set(jobs.schedules) == {"report", "report_often"}


def test_every_ticks_are_multiples_of_the_interval_since_the_epoch(jobs):
    schedule = jobs.periodic("report", every=2)
    at = datetime(2026, 12, 1, 9, 0, 1, 500000, tzinfo=UTC)
    assert schedule.next_after(at) == datetime(2026, 12, 1, 9, 0, 2, tzinfo=UTC)
    # Strictly after: a moment on a tick gets the next one.
    assert schedule.next_after(datetime(2026, 12, 1, 9, 0, 2, tzinfo=UTC)) == datetime(
        2026, 12, 1, 9, 0, 4, tzinfo=UTC
    )
    # Another zone for the same instant changes nothing.
    assert schedule.next_after(at.astimezone(PARIS)) == datetime(2026, 12, 1, 9, 0, 2, tzinfo=UTC)
    fractional = jobs.periodic("report", every=1.5, name="fractional")
    ticks = fractional.upcoming(datetime(1970, 1, 1, tzinfo=UTC), 3)
    assert [t.timestamp() for t in ticks] == [1.5, 3.0, 4.5]


def test_cron_ticks_in_a_time_zone(jobs):
    schedule = jobs.periodic("report", cron="0 3 * * *", timezone="Europe/Paris")
    winter = schedule.next_after(datetime(2026, 12, 1, 12, tzinfo=UTC))
    assert winter == datetime(2026, 12, 2, 2, tzinfo=UTC)  # 03:00 CET
    summer = schedule.next_after(datetime(2026, 7, 1, 12, tzinfo=UTC))
    assert summer == datetime(2026, 7, 2, 1, tzinfo=UTC)  # 03:00 CEST
    seconds = jobs.periodic("report", cron="*/10 * * * * *", name="seconds")
    assert seconds.next_after(datetime(2026, 12, 1, 0, 0, 5, tzinfo=UTC)) == datetime(
        2026, 12, 1, 0, 0, 10, tzinfo=UTC
    )


# Europe/Paris, 2026: clocks go 02:00 CET -> 03:00 CEST on 29 March (02:00-03:00
# does not exist), and 03:00 CEST -> 02:00 CET on 25 October (02:00-03:00 twice).
SPRING_EVE = datetime(2026, 3, 28, 12, tzinfo=UTC)
AUTUMN_EVE = datetime(2026, 10, 24, 12, tzinfo=UTC)


def _local(ticks):
    return [t.astimezone(PARIS).isoformat() for t in ticks]


def test_spring_forward_gap_runs_a_fixed_time_schedule_once_after_the_gap(jobs):
    schedule = jobs.periodic("report", cron="30 2 * * *", timezone="Europe/Paris")
    assert _local(schedule.upcoming(SPRING_EVE, 3)) == [
        "2026-03-29T03:00:00+02:00",  # 02:30 does not exist: the first instant after the gap
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]


def test_spring_forward_gap_has_no_ticks_for_a_wildcard_hour_schedule(jobs):
    schedule = jobs.periodic("report", cron="*/30 * * * *", timezone="Europe/Paris")
    start = datetime(2026, 3, 29, 0, 0, tzinfo=UTC)  # 01:00 CET
    assert _local(schedule.upcoming(start, 4)) == [
        "2026-03-29T01:30:00+01:00",
        "2026-03-29T03:00:00+02:00",  # 02:00 and 02:30 never happened
        "2026-03-29T03:30:00+02:00",
        "2026-03-29T04:00:00+02:00",
    ]
    # Ticks stay half an hour apart in real time across the gap.
    ticks = schedule.upcoming(start, 4)
    assert {b - a for a, b in itertools.pairwise(ticks)} == {timedelta(minutes=30)}


def test_autumn_overlap_runs_a_fixed_time_schedule_once_in_the_first_pass(jobs):
    schedule = jobs.periodic("report", cron="30 2 * * *", timezone="Europe/Paris")
    assert _local(schedule.upcoming(AUTUMN_EVE, 2)) == [
        "2026-10-25T02:30:00+02:00",  # first pass (CEST) only
        "2026-10-26T02:30:00+01:00",
    ]
    # Asked from inside the second pass (02:10 CET, after the 02:30 CEST tick ran),
    # the next tick is the next day's: 02:30 CET is not a second run.
    inside = datetime(2026, 10, 25, 1, 10, tzinfo=UTC)
    assert _local([schedule.next_after(inside)]) == ["2026-10-26T02:30:00+01:00"]


def test_autumn_overlap_runs_a_wildcard_hour_schedule_in_both_passes(jobs):
    schedule = jobs.periodic("report", cron="0 * * * *", timezone="Europe/Paris")
    start = datetime(2026, 10, 24, 22, 30, tzinfo=UTC)  # 00:30 CEST
    ticks = schedule.upcoming(start, 4)
    assert _local(ticks) == [
        "2026-10-25T01:00:00+02:00",
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:00:00+01:00",  # the same wall time, an hour later
        "2026-10-25T03:00:00+01:00",
    ]
    assert {b - a for a, b in itertools.pairwise(ticks)} == {timedelta(hours=1)}


def test_next_after_is_strictly_increasing_through_both_transitions(jobs):
    """Walking tick to tick never repeats or goes back, whatever the zone does."""
    crons = ("30 2 * * *", "*/20 * * * *", "0 2,3 * * *", "15 1-4 * * *")
    for number, cron in enumerate(crons):
        schedule = jobs.periodic("report", cron=cron, timezone="Europe/Paris", name=f"s{number}")
        for eve in (SPRING_EVE, AUTUMN_EVE):
            ticks = schedule.upcoming(eve, 40)
            assert all(a < b for a, b in itertools.pairwise(ticks)), cron


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"every": 60, "jitter": 61}, "jitter=61s is longer than the 60s between two ticks"),
        (
            {"every": timedelta(minutes=5), "jitter": timedelta(hours=1)},
            "jitter=3600s is longer than the 300s between two ticks of every=300s",
        ),
        ({"cron": "*/5 * * * *", "jitter": 301}, "longer than the 300s between two ticks of cron"),
        (
            {"cron": "*/1000000 * * * *"},
            r"step 1000000 of the minute field \(\*/1000000\) reaches past its range 0-59",
        ),
        ({"cron": "0 */25 * * *"}, "step 25 of the hour field"),
        ({"cron": "0 0 1 1/13 *"}, "step 13 of the month field"),
        ({"cron": "*/90 * * * * *"}, "step 90 of the second field"),
    ],
)
def test_a_jitter_longer_than_the_period_or_a_cron_step_past_its_field_is_refused_at_the_call(
    jobs, kwargs, message
):
    with pytest.raises(ConfigurationError, match=message):
        jobs.periodic("report", **kwargs)
    assert jobs.schedules == {}


def test_a_jitter_up_to_the_period_and_steps_within_their_field_are_taken(jobs):
    assert jobs.periodic("report", every=60, jitter=60).jitter == 60
    assert jobs.periodic("report", cron="*/59 * * * *", name="b", jitter=59).cron
    assert jobs.periodic("report", cron="0 0 */30 * *", name="c").cron


def test_a_stored_definition_an_earlier_version_took_is_still_read_back(jobs):
    from sa_jobqueue.periodic.definitions import from_definition, from_spec

    stored = from_definition("old", "report", {"every": 60, "jitter": 600})
    assert stored.jitter == 600
    assert from_spec("old", "report", "cron */1000000 * * * * UTC").cron == "*/1000000 * * * *"
