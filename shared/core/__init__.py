"""Small pure helpers every floor uses: durations, waiting on events, backoff against a dependency that
stays away, credentials removed from output."""
