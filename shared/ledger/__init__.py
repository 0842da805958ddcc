"""The admission ledger in Redis: its keys, its Lua scripts, the slots the limits count, the queue of jobs
waiting on a limit, its rebuild, the migration statistics, and each service's Redis user over its keys."""
