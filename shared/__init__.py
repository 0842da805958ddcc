"""Podherd's common library: API types, configuration, limit math and the adapters the services share."""
