"""Figures of the ``bayes_sampler`` experiment (paper 000, App. B), drawn by
:mod:`weightdyn.plots.bayes`; ``bayes_experiment`` declares them with ``figures=FIGURES``.

Each declaration names the axes its figure draws along and averages the data seeds; an axis
the cells vary beyond these is drawn one panel per value (:mod:`weightdyn.plots.facets`).
"""

from __future__ import annotations

from weightdyn.experiments import Figure, LazyPlots

bayes = LazyPlots("weightdyn.plots.bayes")

#: axes averaged over by every figure (data sets; repetitions of the Wang et al. protocol)
SEEDS = ("data_seed",)
#: the variant of App. B: preconditioner Lambda, weight decay chi, temperature T
VARIANT = ("preconditioner", "weight_decay", "temperature")

FIGURES = {
    "kl_vs_lr": Figure(
        bayes.kl_vs_lr,
        "**Paper 000 App. B: SGD as a sampler.** Gaussian KL divergence of the stationary law "
        "N(w_min, M) from the target (posterior (σ²/P)K⁻¹ or sandwich J⁻¹VJ⁻¹/n; left, log) and "
        "relative Frobenius error ||M − Σ||_F/||Σ||_F (right) against λ over the variant's "
        "second-moment stability limit, one colour per variant (preconditioner Λ, weight decay "
        "χ, injected-noise temperature T): SGD (open circles, ±1 s.e., jackknife over replica "
        "time blocks, over data sets the s.e. of their mean), the exact discrete-time "
        "stationary covariance (solid) and the continuous-time Lyapunov law of Eqs. 29-30 "
        "(dashed). Filled markers: λ from a tuning rule (Mandt, Hoffman & Blei 2017, Thm. 1; "
        "the exact-KL optimum); crosses: beyond the stability limit (no stationary law).",
        axes=("lr", "lr_rule", *VARIANT),
        averaged=SEEDS,
    ),
    "kl_vs_batch": Figure(
        bayes.kl_vs_batch,
        "**Paper 000 App. B: SGD as a sampler.** KL divergence from the target (left) and "
        "relative Frobenius error (right) against the batch size S, one colour per rule "
        "(preconditioner Λ and learning-rate rule: Mandt, Hoffman & Blei 2017; Wang, Ding & "
        "Huggins 2026; the exact-KL optimum): SGD (mean over data sets, ±1 s.d. over them, or "
        "the jackknife s.e. of a single data set), the exact discrete-time theory (solid) and "
        "the continuous-time law of Eqs. 29-30 (dashed), averaged over data sets. A rule that is "
        "exact in continuous time (Mandt et al.'s with C⁻¹, 2B/n with J⁻¹) has a dashed curve at "
        "round-off (KL ≈ 1e-15), below the axis.",
        axes=("batch_size", "preconditioner", "lr_rule", "weight_decay", "temperature"),
        averaged=SEEDS,
    ),
    "spectra": Figure(
        bayes.spectra,
        "**Paper 000 App. B, as Fig. 4b.** Sorted eigenvalues of the stationary covariance M "
        "of SGD about w_min (open circles, band ±2 s.e.) against the exact discrete-time "
        "theory (solid), the continuous-time law of Eqs. 29-30 (dashed) and the target "
        "(grey-black), one panel per variant (at most six), data sets averaged; each panel "
        "states the KL divergence from the target.",
        axes=(*VARIANT, "lr_rule", "lr"),
        averaged=SEEDS,
    ),
    "protocol": Figure(
        bayes.protocol,
        "**The protocol of Wang, Ding & Huggins (2026) with paper 000 App. B.** Relative "
        "Frobenius error ||M − Σ||_F/||Σ||_F of the sampled covariance against the sandwich "
        "target Σ = J⁻¹VJ⁻¹/n (heteroskedastic regression) vs batch size B = S, one colour per "
        "rule: the continuous-time rule λ = 2B/n with Λ = J⁻¹ (Eqs. 29-30; Mandt, Hoffman & "
        "Blei 2017), Wang et al.'s discrete rule (λ = 1) and the exact-KL optimal λ (with "
        "Λ = J⁻¹, and the optimal diagonal λΛ). Markers: SGD, mean over repetitions (data "
        "sets), ±1 s.d. over them; lines: the exact discrete-time prediction, mean over the "
        "data sets.",
        axes=("batch_size", "preconditioner", "lr_rule"),
        averaged=SEEDS,
    ),
    "injected_noise": Figure(
        bayes.injected_noise,
        "**Paper 000 App. B: injected noise (Welling & Teh 2011).** tr M over T tr K⁻¹, the "
        "law of the injected noise alone (dotted line at 1, the λ → 0 limit of Eq. 29 at fixed "
        "T), against λ, one colour per temperature T (units σ²/P): SGD (±1 s.e., jackknife), "
        "the exact discrete-time theory (solid) and the continuous-time law of Eqs. 29-30 "
        "(dashed). Dotted verticals: the crossover λ = 2NT/tr(ΛC) above which mini-batch noise "
        "dominates the injected noise.",
        axes=("lr", "temperature", "preconditioner", "lr_rule"),
        averaged=SEEDS,
    ),
}
