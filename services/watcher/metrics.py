"""The watcher's Prometheus metrics."""

from prometheus_client import Counter, Gauge, Histogram

EVENTS = Counter("podherd_watcher_events_total", "Object events published", ["kind", "type"])
RELISTS = Counter(
    "podherd_watcher_relists_total", "Full relists (first start without checkpoint, or 410)", ["kind"]
)
RESTARTS = Counter("podherd_watcher_watch_restarts_total", "Watch streams restarted", ["kind", "reason"])
DECODE_ERRORS = Counter("podherd_watcher_decode_errors_total", "Objects that did not decode", ["kind"])
PUBLISH_SECONDS = Histogram(
    "podherd_watcher_publish_seconds",
    "Time to have a batch of events acknowledged by JetStream",
    ["kind"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
LAG_SECONDS = Histogram(
    "podherd_watcher_lag_seconds",
    "From an event arriving from the API server to its acknowledgement by JetStream",
    ["kind"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
LEADER = Gauge("podherd_watcher_leader", "1 while this replica holds the kind's lease", ["kind"])
RESOURCE_VERSION = Gauge(
    "podherd_watcher_checkpoint_resource_version", "Last checkpointed resourceVersion", ["kind"]
)
