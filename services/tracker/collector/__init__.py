"""Finished jobs collected after their retention (`collectable` decides, `collecting` deletes)."""
