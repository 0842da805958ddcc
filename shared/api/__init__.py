"""Podherd's API: Kubernetes objects (PMJ, Reservation) and NATS messages, as msgspec Structs.

This package is part of the pure core: it imports no I/O library.
"""
