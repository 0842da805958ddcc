"""Where each of Koordinator v1.8.0's migration controller and descheduler configuration test cases went
(`tests/data/koordinator/test-cases.txt` lists them; `scripts/koordinator_test_cases.py` makes the list from
Koordinator's module): ported (the test that carries it, its id the Go case's name where it has one),
differs on purpose (why), or not applicable (why). `tests/unit/test_koordinator_cases.py` holds the table
to the list and every ported case to a test that exists."""

from __future__ import annotations

from typing import Final

PORTED: Final = "ported"
DIFFERS: Final = "differs on purpose"
NOT_APPLICABLE: Final = "not applicable"

CASES_UNIT = "tests/unit/test_koordinator_arbitrator_cases.py"
RULES = "tests/unit/test_arbitration_rules.py"
ARBITRATOR = "tests/integration/test_arbitrator.py"
LIFECYCLE = "tests/e2e/test_lifecycle.py"
CONFORMANCE = "tests/conformance/test_migrations.py"  # on kubesim, and on the real control plane
INTSTR = "tests/unit/test_intstr.py"
RESERVATION_OPTIONS = "tests/unit/test_koordinator_reservation_options.py"
CONFIG_CASES = "tests/unit/test_koordinator_config_cases.py"
PROGRESS = "tests/unit/test_job_progress.py"

_FILTER = "arbitrator/filter_test.go"
_ARBITRATOR = "arbitrator/arbitrator_test.go"
_SORT = "arbitrator/sort_test.go"
_CONTROLLER = "controller_test.go"
_UTIL = "util/util_test.go"
_RESERVATION = "reservation/util_test.go"
_VALIDATION = "apis/config/validation/validation_pluginargs_test.go"
_DESCHEDULER = "apis/config/validation/validation_test.go"
_DEFAULTS = "apis/config/v1alpha2/defaults_test.go"
_LOW_NODE_LOAD = (
    "LowNodeLoad's arguments: Podherd runs no LowNodeLoad plugin (its rebalancing has its own settings)"
)
_LOW_NODE_LOAD_DEFAULTS = ("nodeFit", "detectorCacheTimeout", "anomalyCondition", "weights")
_POOLS = "TestSetDefaults_NodePoolsUseDefaultArgsFromLowNodeLoadArgs"
_POOLS_CASES = (
    "nodePools inherit all fields from top-level config",
    "multiple nodePools inherit from top-level config",
    "nodePools with partial zero values inherit from top-level",
    "nodePools keep own config when specified",
)
_PROCESS = (
    "the descheduler process's own settings, which Podherd does not run (it warns that it ignores them)"
)

# The Go function, and the Podherd test its cases are ported to (each case by its name as the test's id).
_PORTED_WITH_CASES = (
    {
        f"{_FILTER} :: {go}": f"{CASES_UNIT}::{test}"
        for go, test in (
            ("TestFilterMaxMigratingGlobally", "test_filter_max_migrating_globally"),
            ("TestFilterMaxMigratingPerNode", "test_filter_max_migrating_per_node"),
            ("TestFilterMaxMigratingPerNamespace", "test_filter_max_migrating_per_namespace"),
            ("TestFilterMaxMigratingPerWorkload", "test_filter_max_migrating_per_workload"),
            ("TestFilterMaxUnavailablePerWorkload", "test_filter_max_unavailable_per_workload"),
            ("TestFilterExpectedReplicas", "test_filter_expected_replicas"),
        )
    }
    | {
        f"{_UTIL} :: TestGetMaxUnavailable": f"{INTSTR}::test_get_max_unavailable",
        f"{_UTIL} :: TestFilterPodWithMaxEvictionCost": f"{RULES}::test_filter_pod_with_max_eviction_cost",
        f"{_VALIDATION} :: TestValidateMigrationControllerArgs": (
            f"{CONFIG_CASES}::test_validate_migration_controller_args"
        ),
    }
    | {
        f"{_CONTROLLER} :: {go}": f"{CASES_UNIT}::{test}"
        for go, test in (
            ("TestRequeueJobIfObjectLimiterFailed", "test_requeue_job_if_object_limiter_failed"),
            (
                "TestRequeueJobIfObjectLimiterFailedWithNamespace",
                "test_requeue_job_if_object_limiter_failed_with_namespace",
            ),
        )
    }
)

# Cases that are a Go function's `t.Run` of their own, not one of its table's.
_SKIP_GATES = {
    f"{_FILTER} :: TestFilterMaxMigratingGlobally :: skip gate MaxMigratingGlobally": (
        f"{CASES_UNIT}::test_filter_max_migrating_globally_skip_gate"
    ),
    f"{_FILTER} :: TestFilterMaxMigratingPerNode :: skip gate MaxMigratingPerNode": (
        f"{CASES_UNIT}::test_filter_max_migrating_per_node_and_namespace_skip_gate"
    ),
    f"{_FILTER} :: TestFilterMaxMigratingPerNamespace :: skip gate MaxMigratingPerNamespace": (
        f"{CASES_UNIT}::test_filter_max_migrating_per_node_and_namespace_skip_gate"
    ),
    f"{_FILTER} :: TestFilterMaxMigratingPerWorkload :: skip gate MaxMigratingPerWorkload": (
        f"{CASES_UNIT}::test_filter_max_migrating_and_unavailable_per_workload_skip_gates"
    ),
    f"{_FILTER} :: TestFilterMaxUnavailablePerWorkload :: skip gate MaxUnavailablePerWorkload": (
        f"{CASES_UNIT}::test_filter_max_migrating_and_unavailable_per_workload_skip_gates"
    ),
}

_MECHANISM = (
    "Koordinator's arbitrator keeps jobs in memory (a waiting collection, an arbitrated map, an annotation "
    "marking a passed job) and this tests that machinery; Podherd's state is the Redis ledger, whose "
    "scripts are tested against the reference rules (tests/integration/test_ledger.py)"
)
_ORDER = (
    "the order differs on purpose: the PodMigrationJob proposal sorts the costliest pods to disturb (higher "
    "QoS and priority) first, Koordinator's code the cheapest; `arbitrator.sortOrder: cheapestFirst` selects "
    "Koordinator's "
    f"({RULES}::test_cheapest_first_reverses_qos_and_priority)"
)

_BY_JOB = (
    "Koordinator ranks and groups jobs by the batch Job their pods belong to (its migrating jobs first, one "
    "Job's jobs together); Podherd ranks by the pod's workload of any kind: fewer of its replicas migrating "
    f"now first, then fewer past migrations (the PodMigrationJob proposal; {RULES}::test_sort_order)"
)

VERDICTS: Final[dict[str, tuple[str, str]]] = {
    **{name: (PORTED, test) for name, test in _PORTED_WITH_CASES.items()},
    **{name: (PORTED, test) for name, test in _SKIP_GATES.items()},
    f"{_FILTER} :: TestFilterExistingMigrationJob": (
        PORTED,
        f"{CASES_UNIT}::test_filter_existing_migration_job",
    ),
    f"{_FILTER} :: TestArbitratedMap": (NOT_APPLICABLE, _MECHANISM),
    f"{_ARBITRATOR} :: TestSingleSortFn": (DIFFERS, _ORDER),
    f"{_ARBITRATOR} :: TestMultiSortFn": (DIFFERS, _ORDER),
    f"{_ARBITRATOR} :: TestFiltering": (
        PORTED,
        f"{ARBITRATOR}::test_do_once_arbitrate_fails_the_non_retryable_holds_the_retryable_and_passes_the_rest",
    ),
    f"{_ARBITRATOR} :: TestAdd": (NOT_APPLICABLE, _MECHANISM),
    f"{_ARBITRATOR} :: TestRequeueJobIfRetryablePodFilterFailed": (
        PORTED,
        f"{ARBITRATOR}::test_do_once_arbitrate_fails_the_non_retryable_holds_the_retryable_and_passes_the_rest",
    ),
    f"{_ARBITRATOR} :: TestAbortJobIfNonRetryablePodFilterFailed": (
        PORTED,
        f"{ARBITRATOR}::test_filters_reject_and_a_pod_the_facts_do_not_know_waits_until_it_is_known",
    ),
    f"{_ARBITRATOR} :: TestDoOnceArbitrate": (
        PORTED,
        f"{ARBITRATOR}::test_do_once_arbitrate_fails_the_non_retryable_holds_the_retryable_and_passes_the_rest",
    ),
    **{
        f"{_ARBITRATOR} :: TestDoOnceArbitrate :: test-{i}": (
            PORTED,
            f"{ARBITRATOR}::test_do_once_arbitrate_fails_the_non_retryable_holds_the_retryable_and_passes_the_rest",
        )
        for i in range(1, 6)
    },
    f"{_ARBITRATOR} :: TestArbitrate": (
        PORTED,
        f"{ARBITRATOR}::test_seed_001_three_replicas_one_at_a_time_event_driven",
    ),
    f"{_ARBITRATOR} :: TestUpdatePassedJob": (NOT_APPLICABLE, _MECHANISM),
    f"{_ARBITRATOR} :: TestUpdateFailedJob": (
        PORTED,
        f"{ARBITRATOR}::test_filters_reject_and_a_pod_the_facts_do_not_know_waits_until_it_is_known",
    ),
    f"{_ARBITRATOR} :: TestEventHandler": (NOT_APPLICABLE, _MECHANISM),
    f"{_SORT} :: TestSortJobsByPod": (DIFFERS, _ORDER),
    f"{_SORT} :: TestSortJobsByCreationTime": (PORTED, f"{RULES}::test_sort_order"),
    f"{_SORT} :: TestSortJobsByMigratingNum": (DIFFERS, _BY_JOB),
    f"{_SORT} :: TestSortJobsByController": (DIFFERS, _BY_JOB),
    f"{_SORT} :: TestGetMigratingJobNum": (DIFFERS, _BY_JOB),
    f"{_CONTROLLER} :: TestAbortJobIfTimeout": (
        PORTED,
        f"{LIFECYCLE}::test_timeout_cleans_up_and_evicts_nothing",
    ),
    f"{_CONTROLLER} :: TestAbortJobByMissingPod": (PORTED, f"{LIFECYCLE}::test_a_missing_pod_fails_the_job"),
    f"{_CONTROLLER} :: TestAbortJobByMissingReservation": (
        PORTED,
        f"{LIFECYCLE}::test_a_reservation_taken_while_the_eviction_waits_is_made_again_before_evicting",
    ),
    f"{_CONTROLLER} :: TestAbortJobByInvalidReservation": (
        DIFFERS,
        "a Reservation whose owners no longer match the pod is not used: Podherd makes its room again (a "
        "new attempt) instead of failing the job, as it does when the room is taken "
        f"({LIFECYCLE}::test_a_reservation_taken_while_the_eviction_waits_is_made_again_before_evicting)",
    ),
    f"{_CONTROLLER} :: TestAbortJobByReservationUnschedulable": (
        PORTED,
        "tests/unit/test_job_progress.py::test_one_step",
    ),
    f"{_CONTROLLER} :: TestHandleScheduleFailed": (
        PORTED,
        f"{CONFORMANCE}::test_a_reservation_that_cannot_be_placed_waits_for_room_and_moves_the_pod_once_there_is",
    ),
    f"{_CONTROLLER} :: TestHandleScheduleSuccess": (
        PORTED,
        f"{CONFORMANCE}::test_reservation_first_moves_the_pod_into_room_the_scheduler_placed",
    ),
    f"{_CONTROLLER} :: TestWaitForPodBindReservation": (
        PORTED,
        f"{LIFECYCLE}::test_a_job_in_flight_counts_once_against_max_unavailable",
    ),
    f"{_CONTROLLER} :: TestEvictPodDirectly": (
        PORTED,
        f"{CONFORMANCE}::test_evict_directly_ends_when_the_pod_is_gone",
    ),
    f"{_CONTROLLER} :: TestEvictPod": (PORTED, f"{LIFECYCLE}::test_delete_and_soft_eviction_policies"),
    f"{_CONTROLLER} :: TestDeleteReservation": (
        PORTED,
        "tests/integration/test_executor_cleanup.py::test_cleanup_reads_the_named_attempts_and_deletes_only_podherds",
    ),
    f"{_CONTROLLER} :: TestCreateReservation": (
        PORTED,
        "tests/unit/test_reservation_template.py::test_the_reservation_is_built_as_koordinator_builds_it",
    ),
    f"{_CONTROLLER} :: TestWaitForPendingPodScheduled": (
        PORTED,
        f"{CONFORMANCE}::test_reservation_first_moves_the_pod_into_room_the_scheduler_placed",
    ),
    f"{_CONTROLLER} :: TestMigrate": (
        PORTED,
        f"{CONFORMANCE}::test_reservation_first_moves_the_pod_into_room_the_scheduler_placed",
    ),
    f"{_CONTROLLER} :: TestMigrateWithSamePodName": (
        PORTED,
        "tests/e2e/test_drain.py::test_a_drain_empties_the_node_keeping_every_workload_up",
    ),
    f"{_CONTROLLER} :: TestMigrateWhenEvictingWithSucceededReservation": (
        PORTED,
        f"{LIFECYCLE}::test_room_taken_between_the_check_and_the_eviction_still_ends_the_job_in_reserved_room",
    ),
    f"{_CONTROLLER} :: TestMigrateWithReservationScheduleFailed": (
        PORTED,
        "tests/unit/test_job_progress.py::test_one_step",
    ),
    f"{_CONTROLLER} :: TestMigrateWithReservationSucceeded": (
        PORTED,
        f"{CONFORMANCE}::test_a_budget_refusing_the_eviction_shows_in_status_then_the_job_succeeds",
    ),
    f"{_CONTROLLER} :: TestMigrateWithReservationExpired": (
        PORTED,
        f"{LIFECYCLE}::test_podherds_own_reservation_that_expires_while_the_eviction_waits_fails_the_job_at_once",
    ),
    f"{_CONTROLLER} :: TestDoScavenge": (
        PORTED,
        "tests/e2e/test_pipeline.py::test_finished_jobs_are_collected_and_an_intent_sent_again_moves_nothing",
    ),
    f"{_CONTROLLER} :: TestEvict": (
        PORTED,
        f"{LIFECYCLE}::test_request_evict_only_pod_is_evicted_in_the_background",
    ),
    f"{_CONTROLLER} :: TestAbortJobIfReserveOnSameNode": (
        DIFFERS,
        "cannot happen: the Reservation Podherd makes excludes the pod's node in its required affinity, as "
        "Koordinator's does (tests/unit/test_reservation_template.py::"
        "test_the_reservation_is_built_as_koordinator_builds_it); a user's named Reservation on the pod's "
        "node is the user's choice",
    ),
    f"{_CONTROLLER} :: TestAllowAnnotatedPodMigrationJobPassFilter": (
        PORTED,
        f"{RULES}::test_the_jobs_evict_annotation_passes_the_object_limiters_and_the_pods_does_not",
    ),
    f"{_CONTROLLER} :: TestFilter": (
        PORTED,
        f"{RULES}::test_each_filter_forbids_and_its_gate_can_be_skipped",
    ),
    f"{_CONTROLLER} :: TestPreEvictionFilter": (
        PORTED,
        "tests/integration/test_intake.py::"
        "test_with_node_fit_a_pod_that_fits_no_other_selected_node_is_refused_naming_what_each_lacks",
    ),
    **{
        f"{_UTIL} :: TestGetCondition{case}": (
            PORTED,
            f"{PROGRESS}::test_reservation_first_to_the_end_and_idempotent",
        )
        for case in (
            "",
            " :: get from empty conditions",
            " :: get expected condition",
            " :: get non-exist condition",
        )
    },
    **{
        f"{_UTIL} :: TestUpdateCondition{case}": (
            PORTED,
            f"{PROGRESS}::test_a_pod_gone_after_the_eviction_is_not_missing_and_times_are_kept",
        )
        for case in (
            "",
            " :: update exist condition",
            " :: update exist same condition",
            " :: update non-exist condition",
        )
    },
    f"{_UTIL} :: TestIsMigratePendingPod": (NOT_APPLICABLE, _MECHANISM),
    f"{_RESERVATION} :: TestCreateOrUpdateReservationOptions": (
        PORTED,
        f"{RESERVATION_OPTIONS}::test_a_templates_whole_metadata_is_kept_but_what_the_api_server_writes",
    ),
    **{
        f"{_RESERVATION} :: TestCreateOrUpdateReservationOptions :: {case}": (
            PORTED,
            f"{RESERVATION_OPTIONS}::test_create_or_update_reservation_options[{case}]",
        )
        for case in (
            "skip current node",
            "skip current node with existing node affinity",
            "skip current node with existing node affinity, enable pvc reservation",
        )
    },
    f"{_RESERVATION} :: TestCreateOrUpdateReservationOptions :: "
    "skip current node with existing node affinity, disable pvc reservation": (
        NOT_APPLICABLE,
        "Koordinator's DisablePVCReservation feature gate (off by default): Podherd keeps the pod's volumes",
    ),
    "evictor/evictor_soft_test.go :: TestPodEvictorMark": (
        PORTED,
        "tests/unit/test_eviction_policy.py::test_a_soft_evictions_initiator_and_reason_are_the_jobs_trigger_and_reason",
    ),
    **{
        f"controllerfinder/pods_finder_test.go :: TestControllerFinder_GetPodsForRef{case}": (
            NOT_APPLICABLE,
            "Podherd knows a pod's workload from its watched events, not by listing a controller's pods "
            "(tests/unit/test_workload_kinds.py)",
        )
        for case in ("", " :: replicaset", " :: deployment", " :: Others")
    },
    "assumed_cache_test.go :: TestAssumedCache": (NOT_APPLICABLE, _MECHANISM),
    "context_test.go :: TestJobContext": (NOT_APPLICABLE, _MECHANISM),
    **{
        f"{_DEFAULTS} :: {entry}": (NOT_APPLICABLE, _LOW_NODE_LOAD)
        for entry in (
            "TestSetDefaults_LowNodeLoadArgs",
            *(f"TestSetDefaults_LowNodeLoadArgs :: set {x}" for x in _LOW_NODE_LOAD_DEFAULTS),
            _POOLS,
            *(f"{_POOLS} :: {case}" for case in _POOLS_CASES),
        )
    },
    **{
        f"{_VALIDATION} :: TestValidateMigrationControllerArgs_{key}": (
            PORTED,
            f"{CONFIG_CASES}::test_validate_migration_controller_args_max_migrating",
        )
        for key in ("MaxMigratingPerNamespace", "MaxMigratingGlobally", "MaxMigratingPerNode")
    },
    **{
        f"{_VALIDATION} :: TestValidateMigrationControllerArgs_{key}": (
            DIFFERS,
            "-1, which Koordinator does not check, is refused as a limit that can never mean anything; 10, "
            "100 and 0 load as in Koordinator "
            f"({CONFIG_CASES}::test_validate_migration_controller_args_per_workload)",
        )
        for key in ("MaxMigratingPerWorkload", "MaxUnavailablePerWorkload")
    },
    f"{_DESCHEDULER} :: TestValidateDeschedulerConfiguration": (
        PORTED,
        f"{CONFIG_CASES}::test_validate_descheduler_configuration",
    ),
    f"{_DESCHEDULER} :: TestValidateDeschedulerConfiguration :: default args": (
        PORTED,
        f"{CONFIG_CASES}::test_validate_descheduler_configuration[default args]",
    ),
    f"{_DESCHEDULER} :: TestValidateDeschedulerConfiguration :: duplicate plugin config": (
        PORTED,
        f"{CONFIG_CASES}::test_validate_descheduler_configuration[duplicate plugin config]",
    ),
    **{
        f"{_DESCHEDULER} :: TestValidateDeschedulerConfiguration :: {case}": (NOT_APPLICABLE, _PROCESS)
        for case in (
            "duplicate profile name",
            "invalid healthzBindAddress",
            "invalid metricsBindAddress",
            "invalid nodeSelector",
        )
    },
}


def verdict(entry: str) -> tuple[str, str] | None:
    """An entry of the list's verdict: its own, or, for a case of a function ported case by case, the
    test of that function with the case's name as its id."""
    if entry in VERDICTS:
        return VERDICTS[entry]
    function, _, case = entry.rpartition(" :: ")
    if function in _PORTED_WITH_CASES:
        return PORTED, f"{_PORTED_WITH_CASES[function]}[{case}]"
    return None
