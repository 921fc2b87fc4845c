"""The service registry: registrations, look-ups, factories, listeners, threads."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from juggle.errors import (
    AlreadyUnregisteredError,
    FilterSyntaxError,
    InvalidConsumerError,
    PropertyError,
    RegistrationError,
    RegistryError,
    ServiceFactoryError,
    ServiceUnavailableError,
    UnknownServiceError,
)
from juggle.runtime.ldapfilter import Version, parse_filter
from juggle.runtime.registry import (
    Registry,
    ServiceEvent,
    ServiceEventKind,
    ServiceFactory,
    ServiceReference,
    ServiceRegistration,
)

ENC = "EncryptionService"
SORT = "SortService"


class Recorder:
    """A listener that records every event it gets."""

    def __init__(self) -> None:
        self.events: list[ServiceEvent] = []

    def __call__(self, event: ServiceEvent) -> None:
        self.events.append(event)

    @property
    def kinds(self) -> list[tuple[ServiceEventKind, int]]:
        return [(event.kind, event.reference.service_id) for event in self.events]


class CountingFactory(ServiceFactory):
    """Makes a fresh object per consumer and counts get/unget calls."""

    def __init__(self) -> None:
        self.made: list[tuple[str, object]] = []
        self.released: list[tuple[str, object]] = []

    def get_service(self, consumer: str, registration: ServiceRegistration) -> object:
        instance = {"consumer": consumer, "service_id": registration.service_id}
        self.made.append((consumer, instance))
        return instance

    def unget_service(
        self, consumer: str, registration: ServiceRegistration, service: object
    ) -> None:
        self.released.append((consumer, service))


# -- registering -----------------------------------------------------------------------------


def test_register_builds_a_reference_with_framework_properties() -> None:
    registry = Registry()
    service = object()
    reg = registry.register([ENC, "Crypto"], service, {"tier": "software"}, ranking=3, module_id=7)
    ref = reg.reference
    assert ref.interfaces == (ENC, "Crypto")
    assert ref.ranking == 3 and ref.module_id == 7
    assert ref.properties["objectClass"] == (ENC, "Crypto")
    assert ref.properties["SERVICE.ID"] == ref.service_id == reg.service_id
    assert ref.properties["service.ranking"] == 3
    assert ref.properties["service.module"] == 7
    assert ref.properties["tier"] == "software"
    assert registry.get_service(ref, "app") is service
    with pytest.raises(TypeError):
        ref.properties["tier"] = "hardware"  # type: ignore[index]


def test_service_ids_increase_and_a_single_name_is_accepted() -> None:
    registry = Registry()
    first = registry.register(ENC, object())
    second = registry.register(ENC, object())
    assert second.service_id > first.service_id
    assert first.reference.interfaces == (ENC,)


def test_user_properties_cannot_forge_framework_properties() -> None:
    registry = Registry()
    ref = registry.register(ENC, object(), {"objectclass": "Fake", "Service.Id": 99}).reference
    assert ref.properties["objectClass"] == (ENC,)
    assert ref.properties["service.id"] == ref.service_id
    assert sorted(ref.properties) == ["objectClass", "service.id", "service.ranking"]


def test_property_values_are_frozen_copies() -> None:
    registry = Registry()
    tags = ["a", "b"]
    ref = registry.register(ENC, object(), {"tags": tags, "sizes": {1, 2}}).reference
    tags.append("c")
    assert ref.properties["tags"] == ("a", "b")
    assert ref.properties["sizes"] == frozenset({1, 2})


def test_ranking_may_come_from_properties() -> None:
    registry = Registry()
    assert registry.register(ENC, object(), {"service.ranking": 4}).reference.ranking == 4
    assert (
        registry.register(ENC, object(), {"service.ranking": 4}, ranking=9).reference.ranking == 9
    )


@pytest.mark.parametrize(
    ("interfaces", "problem"),
    [
        ([], '"interfaces" must be a non-empty'),
        ((), '"interfaces" must be a non-empty'),
        ("", '"interfaces" must hold non-empty strings'),
        ([ENC, 3], "got 3"),
        ([ENC, "  "], "non-empty strings"),
        (b"x", "got 120"),
        (42, "got 42"),
    ],
)
def test_bad_interfaces_register_nothing(interfaces: Any, problem: str) -> None:
    registry = Registry()
    seen = Recorder()
    registry.add_listener(seen)
    with pytest.raises(RegistrationError, match=problem):
        registry.register(interfaces, object())
    assert registry.get_references() == [] and seen.events == []
    assert registry.statistics().services == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "problem"),
    [
        ({"properties": {"Tier": 1, "tier": 2}}, PropertyError, "only in case"),
        ({"properties": {"": 1}}, PropertyError, "non-empty strings"),
        ({"properties": {3: 1}}, PropertyError, "got 3"),
        ({"properties": ["tier"]}, PropertyError, '"properties" must be a mapping'),
        ({"properties": {"service.ranking": "high"}}, PropertyError, "'high'"),
        ({"ranking": 1.5}, PropertyError, '"ranking" must be an int'),
        ({"ranking": True}, PropertyError, '"ranking" must be an int'),
        ({"module_id": "m"}, RegistrationError, '"module_id"'),
    ],
)
def test_bad_properties_register_nothing(
    kwargs: dict[str, Any], error: type[Exception], problem: str
) -> None:
    registry = Registry()
    with pytest.raises(error, match=problem):
        registry.register(ENC, object(), **kwargs)
    assert registry.get_references() == []


def test_none_service_is_rejected() -> None:
    with pytest.raises(RegistrationError, match='"service"'):
        Registry().register(ENC, None)


# -- looking up ------------------------------------------------------------------------------


def test_references_are_sorted_best_first() -> None:
    registry = Registry()
    low = registry.register(ENC, object(), ranking=-1)
    first_zero = registry.register(ENC, object())
    high = registry.register(ENC, object(), ranking=10)
    second_zero = registry.register(ENC, object())
    order = [ref.service_id for ref in registry.get_references(ENC)]
    assert order == [
        high.service_id,
        first_zero.service_id,
        second_zero.service_id,
        low.service_id,
    ]
    assert registry.get_reference(ENC) == high.reference
    assert registry.require_reference(ENC) == high.reference


def test_lookup_by_interface_and_filter() -> None:
    registry = Registry()
    sw = registry.register(ENC, object(), {"tier": "software", "version": "1.9"})
    hw = registry.register([ENC, "Accelerated"], object(), {"tier": "hardware", "version": "1.10"})
    sorter = registry.register(SORT, object(), {"tier": "software"})
    assert registry.get_references(ENC, "(tier=hardware)") == [hw.reference]
    assert registry.get_references(ENC, parse_filter("(version>=1.10)")) == [hw.reference]
    assert registry.get_references(None, "(tier=software)") == [sw.reference, sorter.reference]
    assert registry.get_references(filter="(objectClass=Accel*)") == [hw.reference]
    assert registry.get_references("Nothing") == []
    assert registry.get_reference(SORT, "(tier=hardware)") is None
    assert len(registry.get_references()) == 3


def test_lookups_reject_bad_filters() -> None:
    registry = Registry()
    with pytest.raises(FilterSyntaxError, match="position"):
        registry.get_references(ENC, "(tier=")


def test_require_reference_names_what_is_missing() -> None:
    with pytest.raises(ServiceUnavailableError, match=r"'EncryptionService'.*\(tier=hw\)"):
        Registry().require_reference(ENC, "(tier=hw)")


def test_reference_by_id() -> None:
    registry = Registry()
    reg = registry.register(ENC, object())
    assert registry.reference(reg.service_id) == reg.reference
    with pytest.raises(UnknownServiceError, match="12345"):
        registry.reference(12345)


def test_reference_equality_follows_the_service_not_the_snapshot() -> None:
    registry = Registry()
    reg = registry.register(ENC, object(), {"a": 1})
    before = reg.reference
    after = reg.set_properties({"a": 2})
    assert before == after and hash(before) == hash(after)
    assert before.properties["a"] == 1 and after.properties["a"] == 2
    assert registry.reference(reg.service_id).properties["a"] == 2
    other = registry.register(ENC, object(), {"a": 1}).reference
    assert other != before


# -- properties and unregistration ----------------------------------------------------------


def test_set_properties_changes_lookups_and_ranking() -> None:
    registry = Registry()
    first = registry.register(ENC, object(), {"tier": "software"}, ranking=1)
    second = registry.register(ENC, object(), {"tier": "software"})
    second.set_properties({"tier": "hardware", "service.ranking": 5})
    assert registry.get_reference(ENC) == second.reference
    assert registry.get_references(ENC, "(tier=software)") == [first.reference]
    assert second.reference.properties["objectClass"] == (ENC,)
    first.set_properties({})
    assert first.reference.ranking == 1  # kept when not given
    with pytest.raises(PropertyError):
        first.set_properties({"x": 1, "X": 2})
    assert "x" not in first.reference.properties


def test_unregister_removes_and_a_second_call_raises() -> None:
    registry = Registry()
    reg = registry.register(ENC, object())
    ref = reg.reference
    assert reg.registered
    reg.unregister()
    assert not reg.registered
    assert registry.get_references(ENC) == []
    assert registry.statistics().per_interface == {}
    with pytest.raises(AlreadyUnregisteredError, match=str(ref.service_id)):
        reg.unregister()
    with pytest.raises(AlreadyUnregisteredError):
        reg.set_properties({"a": 1})
    with pytest.raises(AlreadyUnregisteredError):
        _ = reg.reference
    with pytest.raises(UnknownServiceError):
        registry.get_service(ref, "app")
    assert not registry.unget_service(ref, "app")
    assert "unregistered" in repr(reg)


def test_unregister_module_removes_only_that_modules_services() -> None:
    registry = Registry()
    registry.register(ENC, object(), module_id=1)
    registry.register(SORT, object(), module_id=1)
    kept = registry.register(ENC, object(), module_id=2)
    assert registry.unregister_module(1) == 2
    assert registry.get_references() == [kept.reference]
    assert registry.unregister_module(1) == 0


# -- using and factories ---------------------------------------------------------------------


def test_plain_services_count_uses_per_consumer() -> None:
    registry = Registry()
    service = object()
    ref = registry.register(ENC, service).reference
    assert registry.get_service(ref, "mail") is service
    assert registry.get_service(ref.service_id, "mail") is service
    assert registry.get_service(ref, "web") is service
    assert registry.uses(ref) == {"mail": 2, "web": 1}
    assert registry.unget_service(ref, "mail")
    assert registry.unget_service(ref, "mail")
    assert not registry.unget_service(ref, "mail")
    assert registry.uses(ref) == {"web": 1}


def test_factory_gives_each_consumer_its_own_instance() -> None:
    registry = Registry()
    factory = CountingFactory()
    reg = registry.register(ENC, factory)
    ref = reg.reference
    mail = registry.get_service(ref, "mail")
    web = registry.get_service(ref, "web")
    assert mail is not web
    assert mail == {"consumer": "mail", "service_id": reg.service_id}
    assert registry.get_service(ref, "mail") is mail
    assert [consumer for consumer, _ in factory.made] == ["mail", "web"]
    assert registry.statistics().factory_instances == 2

    assert registry.unget_service(ref, "mail")  # 2 -> 1: kept
    assert factory.released == []
    assert registry.unget_service(ref, "mail")  # 1 -> 0: released
    assert factory.released == [("mail", mail)]
    assert registry.get_service(ref, "mail") is not mail  # a fresh one after release
    assert len(factory.made) == 3


def test_unregistering_a_factory_releases_every_consumer() -> None:
    registry = Registry()
    factory = CountingFactory()
    reg = registry.register(ENC, factory)
    instances = {name: registry.get_service(reg.reference, name) for name in ("a", "b", "c")}
    registry.get_service(reg.reference, "a")
    reg.unregister()
    assert sorted(factory.released, key=lambda item: item[0]) == sorted(instances.items())
    assert registry.statistics().uses == 0


def test_release_consumer_drops_all_its_uses() -> None:
    registry = Registry()
    factory = CountingFactory()
    fref = registry.register(ENC, factory).reference
    pref = registry.register(SORT, object()).reference
    instance = registry.get_service(fref, "mail")
    registry.get_service(fref, "mail")
    registry.get_service(pref, "mail")
    registry.get_service(pref, "web")
    assert registry.release_consumer("mail") == 2
    assert factory.released == [("mail", instance)]
    assert registry.uses(pref) == {"web": 1}


class BrokenFactory(ServiceFactory):
    def __init__(self, result: object = None, error: Exception | None = None) -> None:
        self.result, self.error = result, error
        self.ungets = 0

    def get_service(self, consumer: str, registration: ServiceRegistration) -> object:
        if self.error is not None:
            raise self.error
        return self.result

    def unget_service(
        self, consumer: str, registration: ServiceRegistration, service: object
    ) -> None:
        self.ungets += 1
        raise RuntimeError("unget failed")


def test_factory_failures_are_reported_and_leave_no_use() -> None:
    registry = Registry()
    raising = registry.register(ENC, BrokenFactory(error=OSError("no fabric"))).reference
    with pytest.raises(ServiceFactoryError, match="no fabric") as caught:
        registry.get_service(raising, "mail")
    assert isinstance(caught.value.__cause__, OSError)
    assert caught.value.service_id == raising.service_id
    empty = registry.register(ENC, BrokenFactory(result=None)).reference
    with pytest.raises(ServiceFactoryError, match="returned None"):
        registry.get_service(empty, "mail")
    assert registry.uses(raising) == {} and registry.uses(empty) == {}


def test_a_failing_unget_is_logged_and_does_not_stop_unregistration(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = Registry()
    factory = BrokenFactory(result=object())
    reg = registry.register(ENC, factory)
    registry.get_service(reg.reference, "a")
    registry.get_service(reg.reference, "b")
    with caplog.at_level(logging.ERROR, logger="juggle.runtime.registry"):
        reg.unregister()
    assert factory.ungets == 2
    assert not reg.registered
    assert "failed to release" in caplog.text


def test_consumer_names_are_checked() -> None:
    registry = Registry()
    ref = registry.register(ENC, object()).reference
    with pytest.raises(InvalidConsumerError, match='"consumer"'):
        registry.get_service(ref, "")
    with pytest.raises(InvalidConsumerError):
        registry.unget_service(ref, 5)  # type: ignore[arg-type]


# -- listeners -------------------------------------------------------------------------------


def test_listener_sees_every_kind_in_order() -> None:
    registry = Registry()
    seen = Recorder()
    registry.add_listener(seen)
    reg = registry.register(ENC, object())
    reg.set_properties({"tier": "hardware"})
    reg.unregister()
    sid = reg.service_id
    assert seen.kinds == [
        (ServiceEventKind.REGISTERED, sid),
        (ServiceEventKind.MODIFIED, sid),
        (ServiceEventKind.UNREGISTERING, sid),
    ]
    assert seen.events[1].reference.properties["tier"] == "hardware"


def test_listeners_filter_by_interface_and_filter() -> None:
    registry = Registry()
    enc_only = Recorder()
    hardware = Recorder()
    registry.add_listener(enc_only, interface=ENC)
    registry.add_listener(hardware, filter="(tier=hardware)")
    enc = registry.register(ENC, object(), {"tier": "software"})
    sort = registry.register(SORT, object(), {"tier": "hardware"})
    assert enc_only.kinds == [(ServiceEventKind.REGISTERED, enc.service_id)]
    assert hardware.kinds == [(ServiceEventKind.REGISTERED, sort.service_id)]


def test_modified_endmatch_when_the_filter_stops_matching() -> None:
    registry = Registry()
    seen = Recorder()
    registry.add_listener(seen, filter="(tier=hardware)")
    reg = registry.register(ENC, object(), {"tier": "software"})
    reg.set_properties({"tier": "hardware"})  # starts matching: MODIFIED
    reg.set_properties({"tier": "hardware", "load": 3})  # still matching: MODIFIED
    reg.set_properties({"tier": "software"})  # stops matching: MODIFIED_ENDMATCH
    reg.set_properties({"tier": "native"})  # neither before nor after: nothing
    reg.unregister()  # does not match: nothing
    sid = reg.service_id
    assert seen.kinds == [
        (ServiceEventKind.MODIFIED, sid),
        (ServiceEventKind.MODIFIED, sid),
        (ServiceEventKind.MODIFIED_ENDMATCH, sid),
    ]


def test_unregistering_is_sent_while_the_service_is_still_there() -> None:
    registry = Registry()
    observed: list[tuple[bool, object]] = []
    service = object()
    reg = registry.register(ENC, service)

    def listener(event: ServiceEvent) -> None:
        if event.kind is ServiceEventKind.UNREGISTERING:
            found = registry.get_references(ENC)
            observed.append((reg.registered, registry.get_service(found[0], "late")))

    registry.add_listener(listener)
    reg.unregister()
    assert observed == [(True, service)]
    assert registry.get_references(ENC) == []


def test_undo_removes_the_listener_and_is_idempotent() -> None:
    registry = Registry()
    seen = Recorder()
    undo = registry.add_listener(seen)
    registry.register(ENC, object())
    undo()
    undo()
    registry.register(ENC, object())
    assert len(seen.events) == 1
    assert registry.statistics().listeners == 0


def test_a_failing_listener_neither_stops_others_nor_corrupts_state(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = Registry()
    before, after = Recorder(), Recorder()

    def explode(event: ServiceEvent) -> None:
        raise RuntimeError("listener bug")

    registry.add_listener(before)
    registry.add_listener(explode)
    registry.add_listener(after)
    with caplog.at_level(logging.ERROR, logger="juggle.runtime.registry"):
        reg = registry.register(ENC, object())
        reg.unregister()
    assert len(before.events) == len(after.events) == 2
    assert "listener bug" in caplog.text
    assert registry.get_references() == []
    stats = registry.statistics()
    assert stats.listener_errors == 2 and stats.events_delivered == 6


def test_listeners_may_call_back_into_the_registry() -> None:
    registry = Registry()

    def mirror(event: ServiceEvent) -> None:
        if event.kind is ServiceEventKind.REGISTERED and ENC in event.reference.interfaces:
            registry.register(SORT, object(), {"mirrors": event.reference.service_id})

    registry.add_listener(mirror)
    enc = registry.register(ENC, object())
    assert registry.get_references(SORT, f"(mirrors={enc.service_id})")


def test_a_listener_removed_by_another_gets_nothing_more() -> None:
    registry = Registry()
    late = Recorder()
    undo_late: list[Any] = []

    def remover(event: ServiceEvent) -> None:
        undo_late[0]()

    registry.add_listener(remover)
    undo_late.append(registry.add_listener(late))
    registry.register(ENC, object())
    assert late.events == []


def test_bad_listener_arguments() -> None:
    registry = Registry()
    with pytest.raises(RegistrationError, match='"callback"'):
        registry.add_listener("not callable")  # type: ignore[arg-type]
    with pytest.raises(FilterSyntaxError):
        registry.add_listener(Recorder(), filter="(broken")
    assert registry.statistics().listeners == 0


# -- observing -------------------------------------------------------------------------------


def test_statistics_and_repr() -> None:
    registry = Registry()
    registry.add_listener(Recorder())
    registry.add_listener(Recorder(), interface=SORT)
    ref = registry.register([ENC, "Crypto"], object()).reference
    registry.register(ENC, CountingFactory())
    registry.register(SORT, object())
    registry.get_service(ref, "mail")
    stats = registry.statistics()
    assert stats.services == 3 and stats.listeners == 2
    assert dict(stats.per_interface) == {"Crypto": 1, ENC: 2, SORT: 1}
    assert stats.uses == 1 and stats.factory_instances == 0
    assert stats.events_delivered == 4
    assert repr(registry) == "<Registry 3 services, 2 listeners>"
    with pytest.raises(AttributeError):
        stats.services = 0  # type: ignore[misc]


def test_errors_belong_to_the_registry_tree() -> None:
    for error in (
        RegistrationError,
        PropertyError,
        AlreadyUnregisteredError,
        ServiceFactoryError,
        InvalidConsumerError,
    ):
        assert issubclass(error, RegistryError)


def test_versions_as_property_values() -> None:
    registry = Registry()
    registry.register(ENC, object(), {"version": Version(1, 2)})
    new = registry.register(ENC, object(), {"version": Version(2, 0, 1)})
    assert registry.get_references(ENC, "(version>=2)") == [new.reference]


# -- threads ---------------------------------------------------------------------------------


def test_concurrent_register_lookup_and_unregister() -> None:
    registry = Registry()
    events: list[ServiceEvent] = []
    lock = threading.Lock()

    def record(event: ServiceEvent) -> None:
        with lock:
            events.append(event)

    registry.add_listener(record, interface=ENC)
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def provider(worker: int) -> None:
        try:
            start.wait()
            regs = [
                registry.register(ENC, object(), {"worker": worker, "n": n}, ranking=n % 3)
                for n in range(200)
            ]
            for reg in regs[::2]:
                reg.unregister()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def consumer(worker: int) -> None:
        try:
            start.wait()
            for _ in range(200):
                refs = registry.get_references(ENC, "(n>=0)")
                assert refs == sorted(refs, key=lambda ref: ref.sort_key)
                for ref in refs[:3]:
                    try:
                        registry.get_service(ref, f"c{worker}")
                        registry.unget_service(ref, f"c{worker}")
                    except UnknownServiceError:
                        pass  # unregistered between look-up and use: allowed
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=provider, args=(n,)) for n in range(3)]
    threads += [threading.Thread(target=consumer, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    remaining = registry.get_references(ENC)
    assert len(remaining) == 300
    assert len({ref.service_id for ref in remaining}) == 300
    assert all(ref.properties["n"] % 2 == 1 for ref in remaining)
    kinds = [event.kind for event in events]
    assert kinds.count(ServiceEventKind.REGISTERED) == 600
    assert kinds.count(ServiceEventKind.UNREGISTERING) == 300
    assert registry.statistics().uses == 0


class SlowFactory(CountingFactory):
    """Takes a while to build, to widen the window in which two requests could race."""

    def get_service(self, consumer: str, registration: ServiceRegistration) -> object:
        time.sleep(0.02)
        return super().get_service(consumer, registration)


def test_concurrent_factory_requests_create_one_instance_per_consumer() -> None:
    registry = Registry()
    factory = SlowFactory()
    ref = registry.register(ENC, factory).reference
    results: list[object] = []
    start = threading.Barrier(8)

    def grab(consumer: str) -> None:
        start.wait()
        results.append(registry.get_service(ref, consumer))

    threads = [threading.Thread(target=grab, args=(f"c{n % 2}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(factory.made) == 2
    assert len({id(result) for result in results}) == 2
    assert registry.uses(ref) == {"c0": 4, "c1": 4}


def test_reference_is_a_frozen_value() -> None:
    ref = Registry().register(ENC, object()).reference
    assert isinstance(ref, ServiceReference)
    with pytest.raises(AttributeError):
        ref.ranking = 5  # type: ignore[misc]
