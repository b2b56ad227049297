"""Hydra launcher plugin: a multirun of sweeper is one sweep (see ``sweeper.multirun``)."""
