"""The numbers 001 prints, transcribed so reports can show them beside ours.

Source: Saito and Nomura, *Hyperparameter Optimization Can Even be Harmful in Off-Policy
Learning and How to Deal with It* (IJCAI 2024), the table below Table 2 (V(pi0) and
V(pi0)/V(pi*) per beta0, synthetic data of Section 3.1) and Table 1 (Appendix A: test
policy value of the tuned policy on OBD, 5 seeds), as ``sweeper_tasks.published.Published``
records; cells use the axis names of the opl experiments
(``logged_data.beta0``, ``procedure``, ``estimator``, ``logged_data``).

Figures 1, 3-9 and 10-11 print curves only. Section 5.3 states in words that CSO and AIR
improve the final generalisation value at beta0 = 20 by 1.6% and 23.6% (``ABLATION_GAINS``).
"""

from __future__ import annotations

from sweeper_tasks.published import Published

DISPLAY_NAMES: dict[str, str] = {
    "baseline": "Baseline",
    "cir_hpo": "CIR-HPO",
    "cir_hpo_no_cso": "CIR-HPO (w/o CSO)",
    "cir_hpo_no_air": "CIR-HPO (w/o AIR)",
    "tpe": "TPE",
    "random": "RS",
    "ips": "IPS",
    "dr": "DR",
    "dr_crossfit": "DR (q cross-fitted on D_val)",
    "dr_separate": "DR (q on a separate log)",
    "synthetic": "Synthetic",
    "obd": "Open Bandit Dataset",
}
"""001's spelling of config option names, for table headers and legends."""

TABLES: dict[str, str] = {
    "001 Table V(pi0)": "001 (Saito and Nomura, IJCAI 2024), table below Table 2: V(pi0) and "
    "V(pi0)/V(pi*) of the synthetic logging policies",
    "001 Table 1": "001 Table 1 (Appendix A): test policy value of the policies tuned by "
    "Baseline and CIR-HPO on OBD (100,000 rows of the Men campaign, 5 seeds)",
}

ABLATION_GAINS = {"cso": 0.016, "air": 0.236}
"""001 Section 5.3: improvement of CIR-HPO's final generalisation value brought by CSO and
by AIR (beta0 = 20, Figure 7)."""

_V_PI0 = {-3: (0.412, 0.554), 0: (0.501, 0.673), 3: (0.580, 0.831), 10: (0.677, 0.910),
          20: (0.719, 0.966)}  # fmt: skip
_TABLE1 = {("baseline", "ips"): 5.199e-3, ("baseline", "dr"): 5.128e-3,
           ("cir_hpo", "ips"): 5.214e-3, ("cir_hpo", "dr"): 5.303e-3}  # fmt: skip
SYNTHETIC = {"logged_data.n_train": 1000, "logged_data.n_val": 1000}


def _build() -> list[Published]:
    out = []
    for beta0, (value, optimality) in _V_PI0.items():
        cell = {"logged_data.beta0": beta0}
        out.append(Published("001 Table V(pi0)", "v_pi0", cell, value, conditions=SYNTHETIC))
        out.append(
            Published("001 Table V(pi0)", "pi0_optimality", cell, optimality,
                      conditions=SYNTHETIC)
        )  # fmt: skip
    for (procedure, estimator), value in _TABLE1.items():
        out.append(
            Published(
                "001 Table 1",
                "value",
                {"procedure": procedure, "estimator": estimator, "logged_data": "obd"},
                value,
                note="001: 100,000 rows of OBD's Men campaign; ours: the 10,000-row sample",
            )
        )
    return out


PUBLISHED: list[Published] = _build()
