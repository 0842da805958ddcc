"""The admission gate: Podherd's validating webhooks (PodMigrationJobs checked and authorized, evictions of
opted-in pods turned into migrations)."""
