"""Tracker: reconciles every job's progress into the PMJ status, turns intents into PMJs, releases slots."""
