"""The `podherd` command: runs the services, the simulator and the demo."""

__version__ = "0.1.0"
