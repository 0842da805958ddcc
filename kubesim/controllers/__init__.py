"""kubesim's control loops. Each reacts to store events (marking work dirty, never writing from inside the
callback) and does its writes from its own task on the server's loop, as a controller does from its queue."""
