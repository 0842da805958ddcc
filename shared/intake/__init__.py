"""What asks for jobs, shared by the trackers and the podherd command: how an intent is sent, how a drain
is planned and written."""
