"""Each extension point is one table: the eviction gates (their names, kinds and halves), the services
`podherd run` starts, what `podherd sim` takes from kubesim, and kubesim's built-in kinds."""

from __future__ import annotations

import inspect

from kubesim import entry as kubesim_entry
from kubesim.apiserver import kinds, tables
from kubesim.apiserver.admission import Admission
from kubesim.apiserver.store import Store
from services import entry
from services.arbitrator.rules import limits
from shared.api import eviction_gates as gates
from shared.rules import filters


def test_every_gate_is_named_once_and_koordinators_keep_their_names() -> None:
    names = [gate.name for gate in gates.GATES]
    assert len(names) == len(set(names))
    assert len(gates.KOORDINATOR_GATES) == 14
    assert all(name.startswith("podherd.io/") for name in gates.PODHERD_GATES)
    for gate in gates.GATES:
        assert (gate.setting is not None) is (gate.kind is gates.Kind.LIMIT), gate


def test_each_filter_and_limit_of_the_registry_has_its_half_and_no_other_is_judged() -> None:
    assert [name for name, _ in filters._GATES] == [gate.name for gate in gates.FILTERS]
    assert set(limits._LIMITS) == {gate for gate in gates.GATES if gate.kind is gates.Kind.LIMIT}
    # Koordinator's filters and the never-evict cost: what its evict annotation lifts.
    assert {
        "podherd.io/EvictionCost", "BarePods", "Namespaces", "LabelSelector", "PriorityThreshold",
        "SystemCritical", "LocalStorage", "PVC", "ExpectedReplicas",
    } == filters.LIFTED_BY_EVICT  # fmt: skip


def test_a_limits_slots_and_its_refusals_name_its_setting() -> None:
    assert limits.WORKLOAD_GATES == {
        "maxMigratingPerWorkload": "MaxMigratingPerWorkload",
        "maxUnavailablePerWorkload": "MaxUnavailablePerWorkload",
    }


def test_every_service_podherd_runs_has_one_main_found_by_its_name() -> None:
    assert set(entry.MAINS) == {*entry.PIPELINE, entry.GATE, entry.PLANNER}
    for name in entry.MAINS:
        main = entry.main_of(name)
        assert inspect.iscoroutinefunction(main), name
        assert list(inspect.signature(main).parameters) == ["config", "stop", "ops"], name


def test_podherd_sim_finds_what_it_starts_in_kubesims_entry() -> None:
    assert set(kubesim_entry.__all__) <= set(dir(kubesim_entry))
    for name in kubesim_entry.SCENARIOS:
        assert kubesim_entry.resolve(name) is not None, name


def test_each_kubesim_kind_is_one_entry_and_its_printer_prints_a_cell_per_column() -> None:
    served = [(kind.api_version, kind.plural) for kind in kinds.BUILTIN]
    assert len(served) == len(set(served))
    registry = kinds.registry()
    for kind in kinds.BUILTIN:
        group, _, version = kind.api_version.rpartition("/")
        rt = registry.get(group, version, kind.plural)
        assert rt is not None and rt.admit is kind.admit and rt.printer is kind.printer, kind
        if kind.printer is not None:
            spec = {"containers": [{"name": "app"}]} if kind.kind == "Pod" else {}
            obj = {"metadata": {"name": "x", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": spec}
            assert len(kind.printer.cells(obj, tables.age)) == len(kind.printer.columns), kind.kind


def test_a_kinds_admission_is_what_a_write_of_it_gets_and_a_kind_without_one_is_kept_as_written() -> None:
    store = Store(kinds.registry())
    admit = Admission(store)
    namespace = {"metadata": {"name": "team"}}
    admit("CREATE", store.registry.core("namespaces"), None, namespace)
    assert namespace["status"] == {"phase": "Active"}
    config_map = {"metadata": {"name": "c", "namespace": "team"}, "data": {"k": "v"}}
    admit("CREATE", store.registry.core("configmaps"), None, config_map)
    assert config_map == {"metadata": {"name": "c", "namespace": "team"}, "data": {"k": "v"}}
