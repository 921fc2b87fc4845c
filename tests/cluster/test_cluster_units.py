"""juggle.cluster's parts without Ray: the checks of its configurations, the placement views
of node reports, the directory's lookups and the status document."""

from __future__ import annotations

from typing import Any

import pytest

from juggle.cluster import (
    AgentConfig,
    ClusterController,
    Directory,
    NodeReport,
    RegionReport,
    ServiceReport,
    node_view,
    service_key,
)
from juggle.cluster.directory import status_document
from juggle.errors import ConfigurationError


def service(
    key: str, *, tier: str = "native", region: str | None = None, **kw: object
) -> ServiceReport:
    fields: dict[str, object] = {
        "key": key,
        "service_id": 1,
        "interface": "crypto.EncryptionService",
        "interfaces": ("crypto.EncryptionService",),
        "module": key.split("/")[0],
        "properties": {},
        "tier": tier,
        "tiers": ("software", "native", "hardware"),
        "region": region,
        "calls": 10,
        "hardware_calls": 0,
        "calls_per_s": 5.0,
        "software_mean_us": 20.0,
        "hardware_mean_us": None,
    }
    fields.update(kw)
    return ServiceReport(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "value"),
    [
        ({"board": "b 1"}, "b 1"),
        ({"board": "b:1"}, "b:1"),
        ({"board": ""}, ""),
        ({"tls_cert": "c.crt"}, None),
        ({"sample_s": 0.0}, 0.0),
        ({"restart_delay_s": -1.0}, -1.0),
    ],
)
def test_a_bad_agent_config_is_refused_naming_the_value(
    change: dict[str, object], value: object
) -> None:
    fields: dict[str, object] = {"board": "b1", "base": "/tmp/x", **change}
    with pytest.raises(ConfigurationError) as caught:
        AgentConfig(**fields).check()  # type: ignore[arg-type]
    if value is not None:
        assert caught.value.value == value


@pytest.mark.parametrize("period", [0.0, -1.0, float("nan"), float("inf")])
def test_a_controller_period_must_be_positive(period: float) -> None:
    with pytest.raises(ConfigurationError, match="period_s") as caught:
        ClusterController(period_s=period)
    assert caught.value.value == period or period != period


def test_node_view_gives_the_policy_rates_benefits_and_usable_regions() -> None:
    """The benefit is software less hardware mean (the software mean while no hardware
    figure exists); a region in ERROR is not offered; a dead node stays dead."""
    report = NodeReport(
        name="b1",
        alive=False,
        epoch=3,
        address="tls://127.0.0.1:1",
        regions=(
            RegionReport("prr0", "PROGRAMMED", "tdes/crypto.EncryptionService"),
            RegionReport("prr1", "ERROR", None),
        ),
        services=(
            service(
                "tdes/crypto.EncryptionService",
                tier="hardware",
                region="prr0",
                hardware_mean_us=2.0,
            ),
            service("des/crypto.EncryptionService"),
            service("aes/crypto.EncryptionService", tiers=("native",), software_mean_us=None),
        ),
    )
    view = node_view(report)
    assert not view.alive
    assert [r.name for r in view.regions] == ["prr0"]
    assert view.regions[0].service == "tdes/crypto.EncryptionService"
    by_key = {s.key: s for s in view.services}
    assert by_key["tdes/crypto.EncryptionService"].hw_benefit_us == 18.0
    assert by_key["tdes/crypto.EncryptionService"].hardware_us == 2.0
    assert by_key["des/crypto.EncryptionService"].hw_benefit_us == 20.0
    assert by_key["aes/crypto.EncryptionService"].hw_benefit_us == 0.0
    assert not by_key["aes/crypto.EncryptionService"].has_hardware
    assert by_key["des/crypto.EncryptionService"].calls_per_s == 5.0


def test_directory_lookups_and_the_status_document() -> None:
    tdes = service_key("tdes", "crypto.EncryptionService", 1)
    assert tdes == "tdes/crypto.EncryptionService"
    assert service_key(None, "x.Y", 7) == "#7/x.Y"
    up = NodeReport(
        "b1",
        True,
        1,
        "tls://127.0.0.1:1",
        regions=(RegionReport("prr0", "PROGRAMMED", tdes),),
        services=(service(tdes, tier="hardware", region="prr0", hardware_mean_us=1.5),),
        load_per_s=5.0,
    )
    down = NodeReport(
        "b2",
        False,
        2,
        "tls://127.0.0.1:2",
        services=(service(tdes, tier="hardware", region="prr0"),),
    )
    directory = Directory(4, 2, (up, down))
    assert directory.hardware_nodes(tdes) == ("b1",)
    assert directory.node("b2") is down and directory.node("b9") is None
    doc = status_document(directory)
    assert [n["name"] for n in doc["nodes"]] == ["b1", "b2"]
    assert doc["nodes"][0]["regions"] == [{"name": "prr0", "state": "PROGRAMMED", "service": tdes}]
    assert doc["nodes"][1]["alive"] is False
    assert doc["labels"]["nodes"]["services"]["calls_per_s"] == "measured"
    assert up.same_state(NodeReport(**{**_fields(up), "sampled_at": 99.0}))
    assert not up.same_state(NodeReport(**{**_fields(up), "load_per_s": 6.0}))


def _fields(report: NodeReport) -> dict[str, Any]:
    return {name: getattr(report, name) for name in report.__slots__}
