"""Podherd's typed configuration: the model, the loader that reads a file and the environment, and the
documents it takes in (the planner's policies, a DeschedulerConfiguration, disruption windows). Pure."""
