"""Online hyperparameter tuning of contextual bandits (papers 000/003, 002, 004).

Two layers: a bottom-layer contextual bandit (``algorithms/``) pulls arms of an
environment (``environments/``); a top-layer tuner (``tuners/``) picks the bottom
layer's hyperparameters every round from the reward it sees. ``cell.run_cell`` runs one
(algorithm, tuner, dataset, seed) combination.
"""
