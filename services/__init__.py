"""The four Podherd services. Each is a thin loop (decode -> decide -> act -> ack); none imports another."""
