"""Kubernetes access: the API client with its request budget, its watch streams and its errors."""
