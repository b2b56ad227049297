"""Offline hyperparameter optimisation for off-policy learning (paper 001, Saito and Nomura).

One cell runs Algorithm 1 (Baseline) or Algorithm 2 (CIR-HPO) of 001 on logged bandit data
(synthetic, 001 Section 3.1, or the Open Bandit Dataset, 001 Appendix A) with an Optuna
sampler and an OPE estimator, and records the validation and generalisation values of the
best-so-far policy per trial. Imports neither Ray, MLflow nor Hydra.
"""
